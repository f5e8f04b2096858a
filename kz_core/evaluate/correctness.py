"""Comparing outputs with the reference: tolerance tables and the comparison itself.

Runs only in trusted processes: the parent, on tensors rebuilt from the workers' replies,
or a reference worker (candidate code never runs there), on GPU outputs too large to
move, cloned out of the candidate's memory. Candidate code cannot monkeypatch any of it.
The rules are the core's and are not a plugin, so no plugin can loosen them; plugins add
checks of their own through the ``check_outputs`` hook. Rules:

- each output is exactly a ``torch.Tensor`` with the reference's shape and dtype (no
  broadcasting, no silent casts);
- NaN and infinities appear exactly where the reference has them (same sign);
- finite values satisfy ``|actual - expected| <= atol + rtol * |expected|`` with the
  tolerance of the output's dtype; integer and boolean outputs must be equal.

The default tolerance table and KernelBench's are below; ``eval.atol``/``eval.rtol``
replace both for every floating dtype.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from kz_core.model import Finding, Severity, Tolerance

#: Documented default: about a few units in the last place of each format's precision,
#: allowing for a different summation order than the reference.
DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "float64": Tolerance(1e-6, 1e-6),
    "float32": Tolerance(1e-4, 1e-4),
    "float16": Tolerance(5e-3, 5e-3),
    "bfloat16": Tolerance(2e-2, 2e-2),
    "float8_e4m3fn": Tolerance(1e-1, 1e-1),
    "float8_e5m2": Tolerance(1e-1, 1e-1),
}

#: KernelBench's setting: fp32 1e-4, fp16 and bf16 1e-2 (others as fp32).
KERNELBENCH_TOLERANCES: dict[str, Tolerance] = {
    "float64": Tolerance(1e-4, 1e-4),
    "float32": Tolerance(1e-4, 1e-4),
    "float16": Tolerance(1e-2, 1e-2),
    "bfloat16": Tolerance(1e-2, 1e-2),
    "float8_e4m3fn": Tolerance(1e-1, 1e-1),
    "float8_e5m2": Tolerance(1e-1, 1e-1),
}

TOLERANCE_TABLES = {"default": DEFAULT_TOLERANCES, "kernelbench": KERNELBENCH_TOLERANCES}


def tolerance_for(dtype: torch.dtype, table: str = "default", atol: float = -1.0, rtol: float = -1.0) -> Tolerance:
    """The tolerance for outputs of ``dtype`` (exact, zero, for integers and booleans)."""
    if not (dtype.is_floating_point or dtype.is_complex):
        return Tolerance(0.0, 0.0)
    try:
        tolerances = TOLERANCE_TABLES[table]
    except KeyError:
        raise ValueError(f"unknown tolerance table {table!r}: use one of {', '.join(TOLERANCE_TABLES)}") from None
    name = str(dtype).removeprefix("torch.")
    if dtype.is_complex:
        name = "float64" if dtype == torch.complex128 else "float32"
    base = tolerances.get(name, tolerances["float32"])
    return Tolerance(atol if atol >= 0 else base.atol, rtol if rtol >= 0 else base.rtol)


def _index(flat_index: int, shape: Sequence[int]) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        index.append(flat_index % size if size else 0)
        flat_index //= size if size else 1
    return tuple(reversed(index))


#: Elements compared at a time: bounds the float64 temporaries (on a GPU or a CPU) for
#: outputs of billions of elements.
CHUNK_ELEMENTS = 1 << 24


def _values(flat: torch.Tensor, shape: Sequence[int], where: int) -> str:
    return ", ".join(map(str, _index(where, shape)))


def _chunk_errors(want_raw: torch.Tensor, got_raw: torch.Tensor, wide: torch.dtype, tolerance: Tolerance) -> tuple[torch.Tensor, ...]:
    """One chunk of a floating-point comparison, on the device: where NaN and infinities
    differ, where finite values lie outside the tolerance, and the absolute and relative
    errors (0 where either value is not finite)."""
    want, got = want_raw.to(wide), got_raw.to(wide)
    want_nan, got_nan = torch.isnan(want), torch.isnan(got)
    want_inf, got_inf = torch.isinf(want), torch.isinf(got)
    bad_special = (want_nan != got_nan) | (want_inf != got_inf) | (want_inf & got_inf & (want != got))
    finite = torch.isfinite(want) & torch.isfinite(got)
    zero = torch.zeros((), dtype=torch.float64, device=want.device)
    difference = torch.where(finite, (got - want).abs(), zero)
    magnitude = want.abs()
    outside = finite & (difference > tolerance.atol + tolerance.rtol * magnitude)
    relative = torch.where(finite & (magnitude > 0), difference / magnitude.clamp_min(1e-300), zero)
    return bad_special, outside, difference, relative


#: Outputs of at least this many elements on a CUDA device are compared by one Triton
#: kernel (``kz_core.evaluate.device_checks``), smaller ones by torch operations (where
#: they take less time than loading the kernel in a fresh process).
DEVICE_KERNEL_ELEMENTS = 1 << 24


def kernel_checks() -> Any:
    """``kz_core.evaluate.device_checks``, or None where Triton cannot be imported (the
    checks then use torch operations)."""
    try:
        from kz_core.evaluate import device_checks
    except ImportError:
        return None
    return device_checks


def _device_errors(want: torch.Tensor, got: torch.Tensor, tolerance: Tolerance) -> tuple[list[int], list[int], float, float] | None:
    """``_chunk_errors``' counts per chunk and largest errors, from one Triton kernel, for
    large floating-point outputs on a CUDA device; None where it does not apply (or
    cannot run here), and the torch operations compare instead."""
    if not (want.is_cuda and got.device == want.device and want.numel() >= DEVICE_KERNEL_ELEMENTS):
        return None
    device_checks = kernel_checks()
    if device_checks is None or want.dtype not in device_checks.COMPARED_DTYPES:
        return None
    try:
        return device_checks.errors(want, got, tolerance.atol, tolerance.rtol, CHUNK_ELEMENTS)
    except Exception:  # noqa: BLE001 - a GPU or Triton the kernel does not build for: the torch operations decide
        return None


def compare(expected: Any, actual: Any, tolerance: Tolerance, label: str = "output") -> tuple[list[Finding], float, float]:
    """Compare one output with its reference, chunk by chunk, on the tensors' device.

    Counts and largest errors stay on the device until every chunk is compared (one
    synchronisation, not four per chunk: a 6.4 GB output has 96 chunks); the chunk that
    holds the first bad element is compared again to say where it is.

    :returns: ``(findings, max_abs_error, max_rel_error)``; errors are over finite values.
    """
    if type(actual) is not torch.Tensor:
        return [Finding("output_type", f"{label}: the output is a {type(actual).__name__}, not exactly torch.Tensor")], math.inf, math.inf
    if actual.shape != expected.shape:
        return [Finding("shape", f"{label} has shape {tuple(actual.shape)}, the reference {tuple(expected.shape)}")], math.inf, math.inf
    if actual.dtype != expected.dtype:
        return [Finding("dtype", f"{label} has dtype {actual.dtype}, the reference {expected.dtype}")], math.inf, math.inf
    if expected.numel() == 0:
        return [], 0.0, 0.0
    shape = tuple(expected.shape)
    want_all = expected.contiguous().reshape(-1)
    got_all = actual.to(expected.device).contiguous().reshape(-1)
    exact = not (expected.dtype.is_floating_point or expected.dtype.is_complex)
    wide = torch.complex128 if expected.dtype.is_complex else torch.float64
    starts = range(0, want_all.numel(), CHUNK_ELEMENTS)
    fast = None if exact else _device_errors(want_all, got_all, tolerance)
    if fast is not None:
        special_counts, mismatch_counts, max_abs, max_rel = fast
    else:
        mismatched: list[torch.Tensor] = []  # per chunk, on the device
        special: list[torch.Tensor] = []
        largest = torch.zeros(2, dtype=torch.float64, device=want_all.device)  # absolute, relative
        for start in starts:
            want_raw = want_all[start : start + CHUNK_ELEMENTS]
            got_raw = got_all[start : start + CHUNK_ELEMENTS]
            if exact:
                mismatched.append((want_raw != got_raw).sum())
                continue
            bad_special, outside, difference, relative = _chunk_errors(want_raw, got_raw, wide, tolerance)
            special.append(bad_special.sum())
            mismatched.append(outside.sum())
            largest = torch.maximum(largest, torch.stack([difference.max(), relative.max()]))
            del bad_special, outside, difference, relative
        mismatch_counts = torch.stack(mismatched).tolist()
        special_counts = torch.stack(special).tolist() if special else []
        if exact:
            max_abs = max_rel = math.inf if any(mismatch_counts) else 0.0
        else:
            max_abs, max_rel = largest.tolist()
    counts = {"mismatch": int(sum(mismatch_counts)), "non_finite": int(sum(special_counts))}

    def first_bad(chunk_counts: list[int], kind: str) -> tuple[int, str]:
        """Where the first bad element of ``kind`` is, and its values."""
        chunk = next(i for i, n in enumerate(chunk_counts) if n)
        start = starts[chunk]
        want_raw = want_all[start : start + CHUNK_ELEMENTS]
        got_raw = got_all[start : start + CHUNK_ELEMENTS]
        if exact:
            where = int((want_raw != got_raw).nonzero()[0])
            return start + where, f"{got_raw[where].item()}, the reference {want_raw[where].item()}"
        bad_special, outside, difference, _ = _chunk_errors(want_raw, got_raw, wide, tolerance)
        if kind == "non_finite":
            where = int(bad_special.nonzero()[0])
            return start + where, f"{got_raw[where].item()}, the reference {want_raw[where].item()}"
        where = int(outside.nonzero()[0])
        return start + where, (
            f"{got_raw[where].item():.8g}, the reference {want_raw[where].item():.8g} "
            f"(|difference| {float(difference[where]):.3g} > atol {tolerance.atol:g} + rtol {tolerance.rtol:g} * |reference|"
        )

    findings = []
    if counts["non_finite"]:
        where, values = first_bad(special_counts, "non_finite")
        findings.append(
            Finding("non_finite", f"{label}[{_values(want_all, shape, where)}] = {values} ({counts['non_finite']} elements with NaN or infinity where the reference differs)")
        )
    if counts["mismatch"]:
        where, values = first_bad(mismatch_counts, "mismatch")
        if exact:
            message = f"{label}[{_values(want_all, shape, where)}] = {values} ({counts['mismatch']} elements differ)"
        else:
            message = f"{label}[{_values(want_all, shape, where)}] = {values}; {counts['mismatch']} of {want_all.numel()} elements outside the tolerance)"
        findings.append(Finding("mismatch", message))
    return findings, max_abs, max_rel


def compare_outputs(
    problem: Any, expected: Sequence[Any], actual: Sequence[Any], *, pm: Any, table: str, atol: float, rtol: float, label: str
) -> tuple[list[Finding], float, float]:
    """Compare every output with the core's rules, then ask plugins (``check_outputs``) for
    their own checks. Runs in trusted processes only (the parent, or a reference worker).

    :returns: ``(findings, max_abs_error, max_rel_error)`` over all outputs.
    """
    findings: list[Finding] = []
    max_abs = max_rel = 0.0
    for index, (want, got) in enumerate(zip(expected, actual)):
        where = label if len(expected) == 1 else f"{label}, output {index}"
        tolerance = tolerance_for(want.dtype, table, atol, rtol)
        found, abs_error, rel_error = compare(want, got, tolerance, f"{label}: output" if len(expected) == 1 else f"{label}: output {index}")
        findings += found
        if not found or all(f.check in ("mismatch", "non_finite") for f in found):
            max_abs, max_rel = max(max_abs, abs_error), max(max_rel, rel_error)
        if type(got) is torch.Tensor:
            for group in pm.hook.check_outputs(problem=problem, expected=[want], actual=[got], tolerance=tolerance):
                # A plugin's findings are wrong-output findings: reported as mismatch.<check>.
                findings += [Finding(f"mismatch.{f.check}", f"{where}: {f.message}", f.severity, f.line) for f in group]
    return findings, max_abs, max_rel


def flatten_outputs(output: Any) -> tuple[str, list[Any]]:
    """``(structure, leaves)``: ``"tensor"`` for one output, ``"tuple[3]"`` for three. A
    list, a tuple and a named tuple (``torch.return_types.max``, which ``torch.max(x, dim)``
    returns, and a replay rebuilds as a plain tuple) are alike: their tensors in order."""
    if isinstance(output, (tuple, list)):
        return f"tuple[{len(output)}]", list(output)
    return "tensor", [output]


class Agreement:
    """Whether a later call's output agrees with an earlier call's on the same inputs,
    within the tolerance of each output's dtype (not bitwise: a kernel summing with atomics
    may round differently every call). ``Agreement(...)(first, later)`` returns ``""`` when
    they agree, else why not; :meth:`first_disagreement` checks many pairs with one
    synchronisation. ``table``, ``atol`` and ``rtol`` are ``tolerance_for``'s.

    Timing uses it on every timed call (``kz_core.evaluate.timing``): only a call's first
    output on each input set goes to be compared with the reference, and the rest must
    agree with it, so a kernel that works on some calls only is found out on the others.
    """

    def __init__(self, table: str = "default", atol: float = -1.0, rtol: float = -1.0):
        self.table, self.atol, self.rtol = table, atol, rtol

    def __call__(self, first: Any, later: Any) -> str:
        why, tensors = _tensor_pairs(first, later)
        if why:
            return why
        for label, want, value in tensors:
            found, _, _ = compare(want, value, tolerance_for(want.dtype, self.table, self.atol, self.rtol), label)
            errors = [f for f in found if f.severity is Severity.ERROR]
            if errors:
                return errors[0].message
        return ""

    def first_disagreement(self, pairs: Sequence[tuple[Any, Any]]) -> tuple[int, str]:
        """``(index, why)`` of the first ``(first, later)`` pair that disagrees, or
        ``(-1, "")``. The tensors are screened on their device and read back once; a
        suspect pair is then compared as :meth:`__call__` does, which says why."""
        suspects: list[tuple[int, Any]] = []
        for index, (first, later) in enumerate(pairs):
            flag = self._suspect(first, later)
            if flag is not False:
                suspects.append((index, flag))
        flags = [flag for _, flag in suspects if isinstance(flag, torch.Tensor)]
        read = iter(torch.stack(flags).tolist() if flags else [])
        for index, flag in suspects:
            if (next(read) if isinstance(flag, torch.Tensor) else flag) and (why := self(*pairs[index])):
                return index, why
        return -1, ""

    def _suspect(self, first: Any, later: Any) -> bool | torch.Tensor:
        """False where the pair agrees for certain, True where it may not (compare it
        whole), else a boolean tensor on the device: whether any element differs."""
        why, tensors = _tensor_pairs(first, later)
        if why:
            return True
        flags = []
        for _, want, value in tensors:
            if type(value) is not torch.Tensor or value.shape != want.shape or value.dtype != want.dtype or value.device != want.device:
                return True
            if want.numel() >= CHUNK_ELEMENTS:
                return True  # large: compared whole, in chunks
            if want.numel() == 0:
                continue
            want_all, got_all = want.contiguous().reshape(-1), value.contiguous().reshape(-1)
            if not (want.dtype.is_floating_point or want.dtype.is_complex):
                flags.append((want_all != got_all).any())
                continue
            wide = torch.complex128 if want.dtype.is_complex else torch.float64
            tolerance = tolerance_for(want.dtype, self.table, self.atol, self.rtol)
            bad_special, outside, _, _ = _chunk_errors(want_all, got_all, wide, tolerance)
            flags.append((bad_special | outside).any())
        return torch.stack(flags).any() if flags else False


def _tensor_pairs(first: Any, later: Any) -> tuple[str, list[tuple[str, torch.Tensor, Any]]]:
    """Why two calls' outputs differ in structure or in a value that is not a tensor
    (``""`` when they do not), and ``(label, first's tensor, later's leaf)`` for each
    tensor output."""
    structure, wanted = flatten_outputs(first)
    other, got = flatten_outputs(later)
    if other != structure:
        return f"it returned {other}, on the same inputs before {structure}", []
    tensors = []
    for index, (want, value) in enumerate(zip(wanted, got)):
        label = "output" if len(wanted) == 1 else f"output {index}"
        if type(want) is torch.Tensor:
            tensors.append((label, want, value))
        elif type(value) is torch.Tensor or repr(value) != repr(want):
            return f"{label} is {_short(value)}, on the same inputs before {_short(want)}", []
    return "", tensors


def _short(value: Any) -> str:
    text = f"a tensor {tuple(value.shape)}" if isinstance(value, torch.Tensor) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
