"""Comparing outputs with the reference: tolerance tables and the core's ``check_outputs``.

Runs in the trusted parent on tensors rebuilt from the workers' replies, which candidate
code never touched (and cannot monkeypatch: it lives in another process). Rules:

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

from kz_core.hookspecs import hookimpl
from kz_core.model import Finding, Tolerance

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


def compare(expected: Any, actual: Any, tolerance: Tolerance, label: str = "output") -> tuple[list[Finding], float, float]:
    """Compare one output with its reference.

    :returns: ``(findings, max_abs_error, max_rel_error)``; errors are over finite values.
    """
    if type(actual) is not torch.Tensor:
        return [Finding("output_type", f"{label} is a {type(actual).__name__}, not exactly torch.Tensor")], math.inf, math.inf
    if actual.shape != expected.shape:
        return [Finding("shape", f"{label} has shape {tuple(actual.shape)}, the reference {tuple(expected.shape)}")], math.inf, math.inf
    if actual.dtype != expected.dtype:
        return [Finding("dtype", f"{label} has dtype {actual.dtype}, the reference {expected.dtype}")], math.inf, math.inf
    if expected.numel() == 0:
        return [], 0.0, 0.0
    if not (expected.dtype.is_floating_point or expected.dtype.is_complex):
        equal = torch.eq(actual, expected)
        if bool(equal.all()):
            return [], 0.0, 0.0
        where = int((~equal).reshape(-1).nonzero()[0])
        idx = _index(where, expected.shape)
        count = int((~equal).sum())
        return [Finding("mismatch", f"{label}[{', '.join(map(str, idx))}] = {actual[idx].item()}, the reference {expected[idx].item()} ({count} elements differ)")], math.inf, math.inf
    want = expected.to(torch.complex128 if expected.dtype.is_complex else torch.float64)
    got = actual.to(want.dtype)
    findings: list[Finding] = []
    want_nan, got_nan = torch.isnan(want), torch.isnan(got)
    want_inf, got_inf = torch.isinf(want), torch.isinf(got)
    bad_special = (want_nan != got_nan) | (want_inf != got_inf) | (want_inf & got_inf & (want != got))
    if bool(bad_special.any()):
        where = int(bad_special.reshape(-1).nonzero()[0])
        idx = _index(where, expected.shape)
        findings.append(
            Finding(
                "non_finite",
                f"{label}[{', '.join(map(str, idx))}] = {actual[idx].item()}, the reference {expected[idx].item()} "
                f"({int(bad_special.sum())} elements with NaN or infinity where the reference differs)",
            )
        )
    finite = torch.isfinite(want) & torch.isfinite(got)
    difference = torch.where(finite, (got - want).abs(), torch.zeros((), dtype=torch.float64))
    magnitude = want.abs()
    allowed = tolerance.atol + tolerance.rtol * magnitude
    outside = finite & (difference > allowed)
    max_abs = float(difference.max()) if difference.numel() else 0.0
    relative = torch.where(finite & (magnitude > 0), difference / magnitude.clamp_min(1e-300), torch.zeros((), dtype=torch.float64))
    max_rel = float(relative.max()) if relative.numel() else 0.0
    if bool(outside.any()):
        where = int(outside.reshape(-1).nonzero()[0])
        idx = _index(where, expected.shape)
        findings.append(
            Finding(
                "mismatch",
                f"{label}[{', '.join(map(str, idx))}] = {actual[idx].item():.8g}, the reference {expected[idx].item():.8g} "
                f"(|difference| {float(difference.reshape(-1)[where]):.3g} > atol {tolerance.atol:g} + rtol {tolerance.rtol:g} * |reference|; "
                f"{int(outside.sum())} of {expected.numel()} elements outside the tolerance)",
            )
        )
    return findings, max_abs, max_rel


@hookimpl
def check_outputs(problem, expected, actual, tolerance):
    if len(actual) != len(expected):
        return [Finding("output_structure", f"{problem.name}: {len(actual)} outputs, the reference returns {len(expected)}")]
    findings: list[Finding] = []
    for index, (want, got) in enumerate(zip(expected, actual)):
        label = "output" if len(expected) == 1 else f"output {index}"
        found, _, _ = compare(want, got, tolerance, label)
        findings.extend(found)
    return findings
