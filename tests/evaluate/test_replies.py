"""A timing reply is untrusted data, checked field by field (``kz_core.evaluate.replies``)."""

from __future__ import annotations

import pytest

from kz_core.evaluate.replies import ReplyError, validate_timed


def _reply(**changes):
    reply = {
        "stats": {"median_ms": 1.0, "iqr_ms": 0.1, "min_ms": 0.9, "trials": 10, "clock": "cuda_graph"},
        "timed_outputs": [{"seed": 3, "structure": "tensor", "outputs": [None]}],
    }
    reply.update(changes)
    return reply


def test_a_timing_reply_without_a_disagreement_reads_as_none():
    assert validate_timed(_reply(), {3, 5})["disagreement"] == ""
    assert validate_timed(_reply(disagreement="call 7 differs"), {3, 5})["disagreement"] == "call 7 differs"


@pytest.mark.parametrize(
    "changes",
    [
        {"disagreement": 1},
        {"disagreement": ["call 7"]},
        {"timed_outputs": [{"seed": 4, "structure": "tensor", "outputs": [None]}]},
        {"stats": {"median_ms": -1.0, "iqr_ms": 0.1, "min_ms": 0.9, "trials": 10, "clock": "cuda_graph"}},
        {"timed_outputs": []},
    ],
)
def test_a_malformed_timing_reply_is_a_reply_error(changes):
    with pytest.raises(ReplyError):
        validate_timed(_reply(**changes), {3, 5})
