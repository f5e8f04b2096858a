"""Judging what workers measured: findings from trial replies, and the verdict from findings.

Pure functions of plain data (worker replies rebuilt by ``wire.decode_reply``, reference
records, tolerances), run in the trusted parent. Each runtime guard is a named check:

- ``no_kernel_launch``: the backend's launch counter saw no kernel during a forward call;
- ``torch_compute_in_forward``: the profiler saw compute-heavy aten ops in forward;
- ``output_type``: an output is not exactly ``torch.Tensor`` (subclasses, lazy tensors);
- ``output_aliases_input`` / ``input_mutated``: an output shares memory with an input, or
  an input changed during the call;
- ``input_generation``: the candidate's process produced other inputs than the
  reference's from the same secret seed (random generators tampered with);
- ``global_flags``: process-wide torch settings differ after the call;
- ``thread_or_stream``: threads started, the current stream changed, or kernels ran on
  more than one CUDA stream;
- ``state_drift``: outputs of the timed calls differ from the reference;
- ``memoisation``: calls timed on inputs never seen before took ``MEMOISED`` times the
  median on the repeated timing inputs or more (from ``UNSEEN_SLOWER`` on, a warning,
  ``unseen_inputs_slower``, and the unseen time is the candidate's; a GPU runtime that
  could not be timed on unseen inputs gets the warning ``unseen_not_timed``);
- ``output_not_from_kernel``: in a replayed plan, an output's bytes come from torch's
  copies of inputs or constants, not from a kernel of the candidate;
- ``speed_of_light`` (warning): faster than moving the inputs and outputs once at the
  GPU's peak memory bandwidth; flagged for review.

Output comparison itself goes through the ``check_outputs`` hook.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from kz_core.evaluate.correctness import compare_outputs
from kz_core.evaluate.guards import FORMAT_CHECKS
from kz_core.model import Finding, Problem, RuntimeStats, Severity, Verdict
from kz_core.serialization import from_json_dict

#: What a refused unverified fallback's ``not_replayable`` finding adds (``eval.unverified_fallback``;
#: the evaluator's and the fuzzer's refusals alike).
UNVERIFIED_REFUSED = (
    "kz cannot verify it: run in its own process, the candidate could change the evidence, launch counts and times its "
    "verdict rests on; `kz eval ... eval.unverified_fallback=true` runs it there anyway, its result marked unverified_execution"
)


def refused_unverified(finding: Finding) -> Finding:
    """A ``not_replayable`` finding of a backend with ``unverified_fallback``, the setting
    off: the refusal, with the way out named (``UNVERIFIED_REFUSED``)."""
    return attrs.evolve(finding, message=f"{finding.message}. {UNVERIFIED_REFUSED}")

#: Error findings that mean wrong outputs (verdict ``incorrect``).
INCORRECT_CHECKS = frozenset({"mismatch", "shape", "dtype", "non_finite", "output_structure", "output_device", "size_variation", "fuzz"})
#: Output findings that, in the size-variation trial, become ``size_variation``.
_VARIATION_RENAMED = frozenset({"mismatch", "shape", "dtype", "non_finite", "output_structure"})
#: Error findings that name a failed stage, in the order they decide the verdict.
STAGE_CHECKS: tuple[tuple[str, Verdict], ...] = (
    ("unknown_problem", Verdict.FORMAT_ERROR),
    ("compile_error", Verdict.COMPILE_ERROR),
    ("timeout", Verdict.TIMEOUT),
    ("runtime_error", Verdict.RUNTIME_ERROR),
    ("worker_died", Verdict.RUNTIME_ERROR),
    ("reference_error", Verdict.RUNTIME_ERROR),
    ("not_run", Verdict.RUNTIME_ERROR),
    ("unknown_backend", Verdict.RUNTIME_ERROR),
    ("not_replayable", Verdict.RUNTIME_ERROR),
)
#: Findings that say the evaluation could not be done here, through no fault of the
#: candidate's (a missing plugin or toolchain, a reference that failed, a baseline that
#: could not be timed): such a result is never journaled, so a re-run tries again.
INFRASTRUCTURE_CHECKS = frozenset({"not_run", "unknown_backend", "reference_error", "baseline"})
TENSOR_TYPE = "torch.Tensor"

#: Peak memory bandwidth of known GPUs, GB/s, matched by substring of the device name.
PEAK_BANDWIDTH_GBPS: tuple[tuple[str, float], ...] = (
    ("H200", 4800.0),
    ("H100 PCIe", 2000.0),
    ("H100", 3350.0),
    ("H800", 3350.0),
    ("B200", 8000.0),
    ("GB200", 8000.0),
    ("A100-SXM4-80GB", 2039.0),
    ("A100", 1555.0),
    ("L40S", 864.0),
    ("L4", 300.0),
    ("A10G", 600.0),
    ("RTX 4090", 1008.0),
    ("V100", 900.0),
    ("T4", 320.0),
)


def decide_verdict(findings: Iterable[Finding]) -> Verdict:
    """The verdict that error findings imply (warnings and info never change it)."""
    errors = [f.check for f in findings if f.severity is Severity.ERROR]
    if any(check in FORMAT_CHECKS for check in errors):
        return Verdict.FORMAT_ERROR
    for check, verdict in STAGE_CHECKS:
        if check in errors:
            return verdict
    if any(check not in INCORRECT_CHECKS and not check.startswith("mismatch.") for check in errors):
        return Verdict.REJECTED
    if errors:
        return Verdict.INCORRECT
    return Verdict.CORRECT


def summary_message(verdict: Verdict, findings: Sequence[Finding]) -> str:
    """One line: the verdict and the first error finding that decided it."""
    decisive = next((f for f in findings if f.severity is Severity.ERROR), None)
    if decisive is None:
        return verdict.value
    first_line = decisive.message.splitlines()[0] if decisive.message else ""
    if decisive.check == verdict.value:  # "compile_error: ...", not "compile_error: compile_error: ..."
        return f"{verdict.value}: {first_line}"
    return f"{verdict.value}: {decisive.check}: {first_line}"


def _once(findings: list[Finding], finding: Finding) -> None:
    """Keep the first finding of each check (later trials repeat it)."""
    if not any(f.check == finding.check for f in findings):
        findings.append(finding)


def judge_trials(
    problem: Problem,
    reference: dict[int, dict[str, Any]],
    reply: dict[str, Any],
    *,
    pm: Any,
    tolerance_table: str,
    atol: float,
    rtol: float,
    guards: str,
) -> tuple[list[Finding], float | None, float | None, int | None]:
    """Findings for a candidate's correctness trials.

    :returns: ``(findings, max_abs_error, max_rel_error, fewest launches in a trial)``.
    """
    findings: list[Finding] = []
    max_abs = 0.0
    max_rel = 0.0
    launches: int | None = None
    for number, trial in enumerate(reply["trials"], start=1):
        ref = reference[trial["seed"]]
        varied = trial.get("variant")
        where = f"trial {number}" if not varied else "at other sizes (" + ", ".join(f"{k}={v}" for k, v in varied.items()) + ")"
        launches = trial["launches"] if launches is None else min(launches, trial["launches"])
        if trial["input_fingerprints"] != ref["input_fingerprints"]:
            _once(findings, Finding("input_generation", f"{where}: the inputs built in the candidate's process differ from the reference's for the same secret seed (random generators or get_inputs were tampered with)"))
        if trial["launches"] == 0:
            _once(findings, Finding("no_kernel_launch", f"{where}: forward returned without launching any kernel of the declared backend"))
        wrong_types = [t for t in trial["output_types"] if t != TENSOR_TYPE]
        if wrong_types:
            _once(findings, Finding("output_type", f"{where}: outputs must be exactly torch.Tensor, got {', '.join(sorted(set(wrong_types)))}"))
        if trial["aliased"]:
            _once(findings, Finding("output_aliases_input", f"{where}: output {trial['aliased'][0]} shares memory with an input"))
        if trial["mutated"]:
            _once(findings, Finding("input_mutated", f"{where}: input {trial['mutated'][0]} was modified in place by forward"))
        if trial["flags_changed"]:
            name, (before, after) = next(iter(trial["flags_changed"].items()))
            _once(findings, Finding("global_flags", f"{where}: forward changed {name} from {before} to {after}"))
        if trial["threads_started"] > 0 or trial["stream_changed"] or trial.get("streams_created", 0) > 0:
            what = (
                "started threads" if trial["threads_started"] > 0
                else "created CUDA streams" if trial.get("streams_created", 0) > 0
                else "changed the current CUDA stream"
            )
            _once(findings, Finding("thread_or_stream", f"{where}: forward {what}"))
        for index, reason in trial.get("withheld", []):
            _once(findings, Finding("size_variation" if varied else "shape", f"{where}, output {index}: {reason}"))
        for index, writer in trial.get("not_from_kernel", []):
            _once(findings, Finding("output_not_from_kernel", f"{where}: output {index} was last written by {writer}, not by a kernel of the candidate's backend"))
        if trial["structure"] != ref["structure"]:
            _once(findings, Finding("size_variation" if varied else "output_structure", f"{where}: forward returned {trial['structure']}, the reference {ref['structure']}"))
            continue
        wrong_device = [
            (index, device, ref["output_devices"][index])
            for index, device in enumerate(trial["output_devices"])
            if device and ref.get("output_devices") and index < len(ref["output_devices"]) and device != ref["output_devices"][index]
        ]
        if wrong_device:
            index, device, wanted = wrong_device[0]
            _once(findings, Finding("output_device", f"{where}, output {index}: on {device}, the reference on {wanted}"))
            continue
        if "comparison" in trial:  # compared on the GPU by a reference worker
            compared = [from_json_dict(Finding, f) for f in trial["comparison"]["findings"]]
            abs_error, rel_error = trial["comparison"]["max_abs_error"], trial["comparison"]["max_rel_error"]
        else:
            # Only an output that is not a plain tensor, or one withheld (its shape or dtype
            # differs: a finding above), comes without its value; any other missing output
            # is the reply's doing, and skipping it would leave that output unchecked.
            withheld = {entry[0] for entry in trial.get("withheld", [])}
            missing = [
                index for index, got in enumerate(trial["outputs"]) if got is None and trial["output_types"][index] == TENSOR_TYPE and index not in withheld
            ]
            if missing or len(trial["outputs"]) != len(ref["outputs"]):
                what = f"output {missing[0]} is missing" if missing else f"{len(trial['outputs'])} outputs, the reference's {len(ref['outputs'])}"
                _once(findings, Finding("output_type", f"{where}: the reply's outputs are incomplete ({what})"))
                continue
            pairs = [(want, got) for want, got in zip(ref["outputs"], trial["outputs"]) if got is not None]
            compared, abs_error, rel_error = compare_outputs(
                problem, [w for w, _ in pairs], [g for _, g in pairs], pm=pm, table=tolerance_table, atol=atol, rtol=rtol, label=where
            )
        for finding in compared:
            check = "size_variation" if varied and finding.check in _VARIATION_RENAMED else finding.check
            _once(findings, Finding(check, finding.message, finding.severity, finding.line))
        if trial.get("host_reads") and any(f.severity is Severity.ERROR for f in compared):
            _once(findings, Finding(
                "host_read",
                f"{where}: forward read a value computed from the inputs back to the host ({', '.join(trial['host_reads'][:4])}, e.g. .item()); "
                "a plan replays it as the number it had when recorded, on other inputs, so what depends on it is wrong: pass it to the kernel as a tensor",
                Severity.WARNING,
            ))
        max_abs, max_rel = max(max_abs, abs_error), max(max_rel, rel_error)
    if reply.get("compute_ops"):
        severity = Severity.ERROR if guards == "strict" else Severity.WARNING
        ops = ", ".join(reply["compute_ops"][:8])
        findings.append(Finding("torch_compute_in_forward", f"torch computed in forward ({ops}); the backend's kernels must do the work", severity))
    if len(reply.get("kernel_streams", [])) > 1:
        _once(findings, Finding("thread_or_stream", f"kernels ran on {len(reply['kernel_streams'])} CUDA streams; use the caller's current stream"))
    return findings, max_abs, max_rel, launches


def judge_timed_outputs(
    problem: Problem,
    reference: dict[int, dict[str, Any]],
    reply: dict[str, Any],
    *,
    pm: Any,
    tolerance_table: str,
    atol: float,
    rtol: float,
    unseen: frozenset[int] = frozenset(),
) -> list[Finding]:
    """``state_drift`` when the outputs of timed calls differ from the reference (those
    on the ``unseen`` seeds' inputs, timed after the others, included)."""
    for timed in reply["timed_outputs"]:
        # Unseen inputs of a second timing have no record here: their outputs are compared
        # on the device (``comparison``), and any record gives the outputs' structure.
        ref = reference.get(timed["seed"])
        layout = ref if ref is not None else next(iter(reference.values()), None)
        label = "a timed call on inputs it had not seen before" if timed["seed"] in unseen else "a timed call"
        if layout is not None and timed["structure"] != layout["structure"]:
            return [Finding("state_drift", "the timed calls returned outputs of another structure than the correctness trials")]
        if "comparison" in timed:
            found = [from_json_dict(Finding, f) for f in timed["comparison"]["findings"]]
        elif ref is None:
            return [Finding("state_drift", f"{label}'s output was not compared with the reference")]
        elif any(got is None for got in timed["outputs"]) or len(timed["outputs"]) != len(ref["outputs"]):
            return [Finding("state_drift", "the timed calls returned outputs of another structure or type than the correctness trials")]
        else:
            found, _, _ = compare_outputs(problem, ref["outputs"], timed["outputs"], pm=pm, table=tolerance_table, atol=atol, rtol=rtol, label=label)
        errors = [f for f in found if f.severity is Severity.ERROR]
        if errors:
            return [Finding("state_drift", f"{label}'s output differs from the reference: {errors[0].message}")]
    return []


#: Time per call on unseen inputs over the median on the repeated timing inputs: from
#: ``UNSEEN_SLOWER`` on, the candidate's time is the unseen one (a warning); from
#: ``MEMOISED`` on, it is rejected (``memoisation``). Honest kernels, whose work does not
#: depend on having seen their inputs, stay well below both.
UNSEEN_SLOWER = 1.25
MEMOISED = 3.0


def judge_unseen(runtime: RuntimeStats) -> tuple[RuntimeStats, Finding | None]:
    """The runtime to reward, and a finding, from a candidate's time on unseen inputs
    (``RuntimeStats.unseen_ms``): a forward much slower there than on the repeated timing
    inputs returns results it kept for inputs it had seen."""
    if runtime.unseen_ms is None or runtime.median_ms <= 0:
        return runtime, None
    ratio = runtime.unseen_ms / runtime.median_ms
    said = (
        f"{runtime.unseen_ms * 1e3:.1f} us per call on inputs it had never seen, {ratio:.1f} times its median of "
        f"{runtime.median_ms * 1e3:.1f} us on the timing inputs, which every timed call repeats"
    )
    if ratio >= MEMOISED:
        return runtime, Finding("memoisation", f"{said}: it returns results kept for inputs it has seen instead of computing them")
    if ratio >= UNSEEN_SLOWER:
        note = f"timed on unseen inputs: {said}"
        return attrs.evolve(runtime, median_ms=runtime.unseen_ms, note=f"{runtime.note}; {note}" if runtime.note else note), Finding(
            "unseen_inputs_slower", f"{said}; its time is taken on unseen inputs", Severity.WARNING
        )
    return runtime, None


def peak_bandwidth_gbps(device_name: str, configured: float) -> float:
    """Configured bandwidth, else the table's entry for the device, else 0 (unknown)."""
    if configured > 0:
        return configured
    for marker, bandwidth in PEAK_BANDWIDTH_GBPS:
        if marker in device_name:
            return bandwidth
    return 0.0


def speed_of_light_finding(median_ms: float, bytes_moved: int, bandwidth_gbps: float) -> Finding | None:
    """A warning when the candidate beats reading its inputs and writing its outputs once."""
    if bandwidth_gbps <= 0 or bytes_moved <= 0 or median_ms <= 0:
        return None
    bound_ms = bytes_moved / (bandwidth_gbps * 1e9) * 1e3
    if median_ms < 0.9 * bound_ms:
        return Finding(
            "speed_of_light",
            f"median {median_ms * 1e3:.1f} us is below the memory-bandwidth bound of {bound_ms * 1e3:.1f} us "
            f"({bytes_moved / 1e6:.1f} MB at {bandwidth_gbps:g} GB/s): flagged for review",
            Severity.WARNING,
        )
    return None
