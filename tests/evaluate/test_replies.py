"""A timing reply is untrusted data, checked field by field (``kz_core.evaluate.replies``)."""

from __future__ import annotations

import attrs
import pytest

from kz_core.evaluate.replies import ReplyError, validate_timed

from .conftest import EXAMPLE_CANDIDATES, eval_config


def _reply(**changes):
    reply = {
        "stats": {"median_ms": 1.0, "iqr_ms": 0.1, "min_ms": 0.9, "trials": 10, "clock": "cuda_graph"},
        "timed_outputs": [{"seed": 3, "structure": "tensor", "outputs": [None]}, {"seed": 5, "structure": "tensor", "outputs": [None]}],
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
        # A timing seed's output left out, or one output twice: a check skipped.
        {"timed_outputs": [{"seed": 3, "structure": "tensor", "outputs": [None]}]},
        {"timed_outputs": [{"seed": 3, "structure": "tensor", "outputs": [None]}] * 2 + [{"seed": 5, "structure": "tensor", "outputs": [None]}]},
        {"stats": {"median_ms": 1.0, "iqr_ms": 0.1, "min_ms": 0.9, "trials": 10, "clock": "cuda_graph", "unseen_ms": float("nan")}},
        {"stats": {"median_ms": 1.0, "iqr_ms": 0.1, "min_ms": 0.9, "trials": 10, "clock": "cuda_graph", "unseen_ms": "0.1"}},
    ],
)
def test_a_malformed_timing_reply_is_a_reply_error(changes):
    with pytest.raises(ReplyError):
        validate_timed(_reply(**changes), {3, 5})


def test_the_time_on_unseen_inputs_is_a_number_or_absent():
    stats = {"median_ms": 1.0, "iqr_ms": 0.1, "min_ms": 0.9, "trials": 10, "clock": "cuda_graph", "unseen_ms": 1.1}
    assert validate_timed(_reply(stats=stats), {3, 5})["stats"]["unseen_ms"] == 1.1
    assert "unseen_ms" not in validate_timed(_reply(), {3, 5})["stats"]


def test_the_time_on_unseen_inputs_decides_what_is_paid_and_what_is_rejected():
    """``judge.judge_unseen``: an honest forward takes about its median on inputs it has
    never seen; one slower there by ``UNSEEN_SLOWER`` is paid for that time (a warning);
    from ``MEMOISED`` on it is rejected: it returned kept results for repeated inputs."""
    from kz_core.evaluate.judge import MEMOISED, UNSEEN_SLOWER, decide_verdict, judge_unseen
    from kz_core.model import RuntimeStats, Severity, Verdict

    def stats(unseen):
        return RuntimeStats(median_ms=0.1, iqr_ms=0.001, min_ms=0.099, trials=40, clock="cuda_graph", calls_per_trial=64, unseen_ms=unseen)

    for unseen in (None, 0.09, 0.1, 0.1 * UNSEEN_SLOWER * 0.99):
        assert judge_unseen(stats(unseen)) == (stats(unseen), None)
    paid, finding = judge_unseen(stats(0.2))
    assert paid.median_ms == 0.2 and "unseen inputs" in paid.note
    assert finding.check == "unseen_inputs_slower" and finding.severity is Severity.WARNING
    assert decide_verdict([finding]) is Verdict.CORRECT
    paid, finding = judge_unseen(stats(0.1 * MEMOISED))
    assert paid.median_ms == 0.1 and finding.check == "memoisation" and finding.severity is Severity.ERROR
    assert decide_verdict([finding]) is Verdict.REJECTED


def test_a_gpu_timing_reply_must_carry_every_unseen_seeds_output():
    """The first version let events timing check two of four unseen seeds, and the
    evaluator refused such replies only by a check of its own; now the reply's validation
    says it: every unseen seed's output, unless the note says they could not be drawn."""
    from kz_core.evaluate.timing import NOT_TIMED_UNSEEN

    stats = {"median_ms": 1.0, "iqr_ms": 0.1, "min_ms": 0.9, "trials": 10, "clock": "cuda_graph", "unseen_ms": 1.0}
    outputs = [{"seed": seed, "structure": "tensor", "outputs": [None]} for seed in (3, 5, 13, 17)]
    assert validate_timed(_reply(stats=stats, timed_outputs=outputs), {3, 5}, frozenset({13, 17}))
    with pytest.raises(ReplyError, match="unseen inputs are missing"):
        validate_timed(_reply(stats=stats, timed_outputs=outputs[:3]), {3, 5}, frozenset({13, 17}))
    with pytest.raises(ReplyError, match="never drew"):
        validate_timed(_reply(stats=stats, timed_outputs=outputs), {3, 5})
    broken = {**stats, "unseen_ms": None, "note": f"timed with CUDA events: capture failed; {NOT_TIMED_UNSEEN}: RuntimeError"}
    assert validate_timed(_reply(stats=broken, timed_outputs=outputs[:2]), {3, 5}, frozenset({13, 17}))
    with pytest.raises(ReplyError, match="unseen inputs are missing"):  # the note alone does not do
        validate_timed(_reply(stats={**broken, "unseen_ms": 1.0}, timed_outputs=outputs[:2]), {3, 5}, frozenset({13, 17}))


def test_a_time_on_unseen_inputs_above_the_median_is_paid_not_taken_for_a_failed_timing(monkeypatch, example_problems):
    """Written against the version before, seen on the H200: an honest reference
    (KernelBench's 62_conv_standard_2D) had a time on unseen inputs 1.25 times its median
    or more; the ``unseen_inputs_slower`` warning was taken for a failed timing, so the
    correct candidate kept no runtime and no speedup. Now it keeps a runtime, its unseen
    time, with the warning; from ``judge.MEMOISED`` it is rejected. (Unseen inputs are
    timed on a GPU; here the replies are forged.)"""
    from kz_core.evaluate import Evaluator
    from kz_core.evaluate import evaluator as evaluator_module
    from kz_core.model import Candidate, Verdict

    original = evaluator_module.call_worker
    ratios: list[float] = []
    sent: list[float] = []

    def forged(worker, request, timeout, stage):
        reply, failure = original(worker, request, timeout, stage)
        if request.get("op") == "time_plan" and reply is not None and failure is None and ratios:
            ratio = ratios.pop(0)
            sent.append(ratio)
            reply["stats"]["unseen_ms"] = reply["stats"]["median_ms"] * ratio
        return reply, failure

    monkeypatch.setattr(evaluator_module, "call_worker", forged)
    problems = [p for p in example_problems if p.name == "1_vector_add"]
    candidate = Candidate("1_vector_add", "triton", (EXAMPLE_CANDIDATES / "triton" / "1_vector_add.py").read_text(), "add")
    with Evaluator(problems, eval_config("eval.run_timeout_s=60")) as evaluator:
        ratios[:] = [1.6]  # slower on unseen inputs: paid its unseen time, still correct
        result = evaluator.evaluate_one(candidate)
        assert result.verdict is Verdict.CORRECT and sent == [1.6], result.message
        assert result.runtime is not None and result.runtime.unseen_ms == result.runtime.median_ms > 0
        assert "unseen_inputs_slower" in {f.check for f in result.findings}

        sent.clear()
        ratios[:] = [4.0]  # far slower: memoisation
        result = evaluator.evaluate_one(attrs.evolve(candidate, sample_id="add-2"))
        assert result.verdict is not Verdict.CORRECT and sent == [4.0]
        assert "memoisation" in {f.check for f in result.findings}


def _trial(seed: int, **extra):
    return {
        "seed": seed, "structure": "tensor", "launches": 1, "input_fingerprints": [], "output_types": ["torch.Tensor"],
        "output_devices": ["cpu"], "outputs": [None], "mutated": [], "aliased": [], "threads_started": 0,
        "stream_changed": False, "flags_changed": {}, **extra,
    }


def test_a_comparison_a_reply_brings_is_dropped():
    """Only the evaluator attaches a ``comparison`` (a reference worker compared the
    outputs on the device): one a reply brings, from a candidate's own process, would be
    taken for it and the outputs left unchecked. Trials (correctness and fuzz examples
    alike) and timed outputs lose it when checked; trials the evaluator compared keep it."""
    from kz_core.evaluate.replies import validate_trials

    forged = {"findings": [], "max_abs_error": 0.0, "max_rel_error": 0.0}
    reply = validate_trials({"trials": [_trial(3, comparison=dict(forged))]}, {3})
    assert "comparison" not in reply["trials"][0]
    reply = validate_trials({"trials": [_trial(3, comparison=dict(forged))]}, {3}, compared=True)
    assert reply["trials"][0]["comparison"] == forged
    timed = _reply(timed_outputs=[{"seed": seed, "structure": "tensor", "outputs": [None], "comparison": dict(forged)} for seed in (3, 5)])
    assert not any("comparison" in entry for entry in validate_timed(timed, {3, 5})["timed_outputs"])
