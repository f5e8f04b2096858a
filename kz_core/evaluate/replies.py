"""Checking worker replies field by field before the judge reads them.

``wire.decode_reply`` only rebuilds plain data; this module makes sure that the data has
the shape the judge expects: every trial record names a seed the evaluator drew, every
field has its type, lists are no longer than they can be. A reply that fails is that
candidate's ``runtime_error`` ("the reply is malformed: ..."), never an exception that
ends the batch. Pure functions of plain data, run in the parent.
"""

from __future__ import annotations

from typing import Any

from kz_core.model import Verdict


class ReplyError(ValueError):
    """A worker reply that does not have the expected shape (the message says where)."""


_MAX_LIST = 4096


def _expect(value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    if isinstance(kind, tuple):
        ok = any(type(value) is k for k in kind)
    else:
        ok = type(value) is kind
    if not ok:
        names = "/".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise ReplyError(f"{where} must be {names}, not {type(value).__name__}")
    return value


def _strings(value: Any, where: str) -> list[str]:
    _expect(value, list, where)
    if len(value) > _MAX_LIST:
        raise ReplyError(f"{where} is too long")
    for item in value:
        _expect(item, str, where)
    return value


def _indices(value: Any, where: str) -> list[int]:
    _expect(value, list, where)
    if len(value) > _MAX_LIST or not all(type(i) is int and 0 <= i < _MAX_LIST for i in value):
        raise ReplyError(f"{where} must be a list of small indices")
    return value


def check_trial(record: Any, seeds: set[int], where: str) -> dict[str, Any]:
    """One trial record of a correctness reply (candidate worker or executor)."""
    import torch

    _expect(record, dict, where)
    for key in ("seed", "structure", "launches", "input_fingerprints", "output_types", "output_devices", "outputs", "mutated", "aliased", "threads_started", "stream_changed", "flags_changed"):
        if key not in record:
            raise ReplyError(f"{where} lacks {key!r}")
    if type(record["seed"]) is not int or record["seed"] not in seeds:
        raise ReplyError(f"{where} names a seed the evaluator never drew")
    _expect(record["structure"], str, f"{where}.structure")
    if type(record["launches"]) is not int or record["launches"] < 0:
        raise ReplyError(f"{where}.launches must be a non-negative integer")
    _strings(record["input_fingerprints"], f"{where}.input_fingerprints")
    types = _strings(record["output_types"], f"{where}.output_types")
    _strings(record["output_devices"], f"{where}.output_devices")
    outputs = _expect(record["outputs"], list, f"{where}.outputs")
    if len(outputs) != len(types) or len(record["output_devices"]) != len(types):
        raise ReplyError(f"{where}: outputs, their types and devices differ in number")
    for item in outputs:
        if item is not None and type(item) is not torch.Tensor:
            raise ReplyError(f"{where}.outputs holds a {type(item).__name__}")
    _indices(record["mutated"], f"{where}.mutated")
    _indices(record["aliased"], f"{where}.aliased")
    if type(record["threads_started"]) is not int:
        raise ReplyError(f"{where}.threads_started must be an integer")
    _expect(record["stream_changed"], bool, f"{where}.stream_changed")
    if type(record.get("streams_created", 0)) is not int:
        raise ReplyError(f"{where}.streams_created must be an integer")
    flags = _expect(record["flags_changed"], dict, f"{where}.flags_changed")
    for name, pair in flags.items():
        if not (isinstance(name, str) and isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
            raise ReplyError(f"{where}.flags_changed is malformed")
    if "variant" in record:
        variant = _expect(record["variant"], dict, f"{where}.variant")
        if not all(isinstance(k, str) and type(v) is int for k, v in variant.items()):
            raise ReplyError(f"{where}.variant is malformed")
    if "compute_ops" in record:
        _strings(record["compute_ops"], f"{where}.compute_ops")
    if "host_reads" in record:
        _strings(record["host_reads"], f"{where}.host_reads")
    if "withheld" in record:
        entries = _expect(record["withheld"], list, f"{where}.withheld")
        for entry in entries:
            if not (isinstance(entry, list) and len(entry) == 2 and type(entry[0]) is int and isinstance(entry[1], str)):
                raise ReplyError(f"{where}.withheld is malformed")
    if "not_from_kernel" in record:
        entries = _expect(record["not_from_kernel"], list, f"{where}.not_from_kernel")
        for entry in entries:
            if not (isinstance(entry, list) and len(entry) == 2 and type(entry[0]) is int and isinstance(entry[1], str)):
                raise ReplyError(f"{where}.not_from_kernel is malformed")
    if "shared" in record:
        _expect(record["shared"], list, f"{where}.shared")
    if "comparison" in record:
        comparison = _expect(record["comparison"], dict, f"{where}.comparison")
        _expect(comparison.get("findings"), list, f"{where}.comparison.findings")
        for key in ("max_abs_error", "max_rel_error"):
            _expect(comparison.get(key), (float, int), f"{where}.comparison.{key}")
    return record


def validate_trials(reply: Any, seeds: set[int], compared: bool = False) -> dict[str, Any]:
    """A correctness reply: ``trials`` of :func:`check_trial` records, and the fields the
    judge reads next to them.

    :param compared: the evaluator attached each record's ``comparison`` (its outputs were
        compared on the device by a reference worker). Otherwise a ``comparison`` a record
        brings is dropped: the judge would take it for one, and a candidate's own process
        can write anything into its reply.
    """
    _expect(reply, dict, "the reply")
    trials = _expect(reply.get("trials"), list, "trials")
    if not trials or len(trials) > _MAX_LIST:
        raise ReplyError("the reply holds no trial, or too many")
    for index, record in enumerate(trials):
        check_trial(record, seeds, f"trial {index + 1}")
        if not compared:
            record.pop("comparison", None)
    # Every drawn seed once: a reply that leaves a trial out (the size variation's, say)
    # leaves it unjudged.
    named = [record["seed"] for record in trials]
    if len(named) != len(set(named)) or set(named) != set(seeds):
        raise ReplyError(f"the trials name {len(set(named))} of the {len(set(seeds))} seeds drawn for them, each once")
    reply.setdefault("compute_ops", [])
    reply.setdefault("kernel_streams", [])
    _strings(reply["compute_ops"], "compute_ops")
    streams = _expect(reply["kernel_streams"], list, "kernel_streams")
    if len(streams) > _MAX_LIST or not all(type(s) is int for s in streams):
        raise ReplyError("kernel_streams must be a list of integers")
    return reply


def validate_load(reply: Any) -> dict[str, Any]:
    """A candidate worker's reply to ``load``: ``failure`` is None or says what failed
    (never which finding that is: the evaluator decides), ``notes`` are the plugin's
    words, and the counts of what loading started are integers."""
    _expect(reply, dict, "the reply")
    failure = reply.get("failure")
    if failure is not None:
        _expect(failure, dict, "failure")
        _expect(failure.get("message"), str, "failure.message")
        _expect(failure.setdefault("log", ""), str, "failure.log")
        if failure.get("verdict") not in {v.value for v in Verdict}:
            raise ReplyError("failure.verdict names no verdict")
        if failure.setdefault("line", None) is not None and type(failure["line"]) is not int:
            raise ReplyError("failure.line must be an integer or null")
        if "check" in failure:
            raise ReplyError("failure.check: a candidate's process does not name its findings")
    _strings(reply.setdefault("notes", []), "notes")
    for key in ("threads_started", "streams_created"):
        if type(reply.setdefault(key, 0)) is not int:
            raise ReplyError(f"{key} must be an integer")
    return reply


def validate_execution(reply: Any, seeds: Any, reference: Any) -> dict[str, Any]:
    """An executor's correctness reply, with the torch operations of its trials gathered
    where the judge reads them."""
    drawn = set(seeds.trials) | ({reference.variant["seed"]} if reference.variant else set())
    reply = validate_trials(reply, drawn, compared=reference.on_device)
    ops: dict[str, None] = {}
    for record in reply["trials"]:
        for name in record.get("compute_ops", []):
            ops.setdefault(name, None)
    reply["compute_ops"] = list(ops)
    return reply


def validate_timed(reply: Any, seeds: set[int], unseen: frozenset[int] = frozenset()) -> dict[str, Any]:
    """A timing reply: its statistics and the outputs of the timed calls (on ``seeds``,
    and on every ``unseen`` seed too unless its note says the calls could not be timed on
    unseen inputs, without ``stats.unseen_ms``)."""
    import math

    from kz_core.evaluate.timing import NOT_TIMED_UNSEEN

    _expect(reply, dict, "the reply")
    stats = _expect(reply.get("stats"), dict, "stats")
    for key in ("median_ms", "iqr_ms", "min_ms"):
        value = _expect(stats.get(key), (float, int), f"stats.{key}")
        if not math.isfinite(value) or value < 0:
            raise ReplyError(f"stats.{key} must be a finite non-negative number")
    unseen_ms = stats.get("unseen_ms")
    if unseen_ms is not None and (type(unseen_ms) not in (float, int) or not math.isfinite(unseen_ms) or unseen_ms < 0):
        raise ReplyError("stats.unseen_ms must be a finite non-negative number")
    if type(stats.get("trials")) is not int or stats["trials"] < 1:
        raise ReplyError("stats.trials must be a positive integer")
    _expect(stats.get("clock"), str, "stats.clock")
    timed = _expect(reply.get("timed_outputs"), list, "timed_outputs")
    if not timed or len(timed) > _MAX_LIST:
        raise ReplyError("no timed outputs")
    for index, entry in enumerate(timed):
        _expect(entry, dict, f"timed output {index}")
        if type(entry.get("seed")) is not int or entry["seed"] not in seeds | unseen:
            raise ReplyError(f"timed output {index} names a seed the evaluator never drew")
        _expect(entry.get("structure"), str, f"timed output {index}.structure")
        _expect(entry.get("outputs"), list, f"timed output {index}.outputs")
        entry.pop("comparison", None)  # only the evaluator attaches one, after this check
    named = [entry["seed"] for entry in timed]
    if len(named) != len(set(named)) or not set(seeds) <= set(named):
        raise ReplyError("the timed outputs must hold each timing seed's output once")
    if not unseen <= set(named):
        if unseen_ms is not None or NOT_TIMED_UNSEEN not in str(stats.get("note", "")):
            raise ReplyError("the outputs of the calls on unseen inputs are missing")
    _strings(reply.setdefault("compute_ops", []), "compute_ops")
    _expect(reply.setdefault("disagreement", ""), str, "disagreement")
    return reply
