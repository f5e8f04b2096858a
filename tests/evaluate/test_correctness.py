"""Output comparison: tolerances by dtype, exact shapes and dtypes, NaN and infinities."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kz_core.evaluate.correctness import DEFAULT_TOLERANCES, KERNELBENCH_TOLERANCES, compare, tolerance_for
from kz_core.model import Finding, Problem, Tolerance
from kz_core.plugins import get_plugin_manager


def checks(findings: list[Finding]) -> list[str]:
    return [f.check for f in findings]


def test_tolerance_tables():
    assert tolerance_for(torch.float32, "kernelbench") == Tolerance(1e-4, 1e-4)
    assert tolerance_for(torch.float16, "kernelbench") == tolerance_for(torch.bfloat16, "kernelbench") == Tolerance(1e-2, 1e-2)
    assert tolerance_for(torch.float16) == DEFAULT_TOLERANCES["float16"]
    assert tolerance_for(torch.int64) == Tolerance(0.0, 0.0)
    assert tolerance_for(torch.float32, "default", atol=0.5, rtol=-1) == Tolerance(0.5, 1e-4)
    assert set(KERNELBENCH_TOLERANCES) == set(DEFAULT_TOLERANCES)
    with pytest.raises(ValueError, match="unknown tolerance table"):
        tolerance_for(torch.float32, "loose")


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, width=32), min_size=1, max_size=64), st.sampled_from([torch.float32, torch.float64, torch.float16]))
def test_a_tensor_matches_itself(values, dtype):
    tensor = torch.tensor(values, dtype=dtype)
    findings, max_abs, max_rel = compare(tensor, tensor.clone(), tolerance_for(dtype))
    assert findings == [] and max_abs == 0.0 and max_rel == 0.0


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-100, 100, width=32), min_size=1, max_size=64), st.integers(0, 63), st.floats(1.5, 100.0))
def test_an_error_beyond_the_tolerance_is_caught_with_its_index(values, where, factor):
    expected = torch.tensor(values, dtype=torch.float32)
    index = where % expected.numel()
    tolerance = tolerance_for(torch.float32)
    actual = expected.clone()
    actual[index] += factor * (tolerance.atol + tolerance.rtol * abs(float(expected[index])))
    findings, max_abs, _ = compare(expected, actual, tolerance)
    assert checks(findings) == ["mismatch"]
    assert f"output[{index}]" in findings[0].message
    assert max_abs > tolerance.atol


def test_shape_dtype_and_type_must_match_exactly():
    expected = torch.ones(4, 1)
    assert checks(compare(expected, torch.ones(4), tolerance_for(torch.float32))[0]) == ["shape"]
    assert checks(compare(expected, torch.ones(4, 1, dtype=torch.float64), tolerance_for(torch.float32))[0]) == ["dtype"]

    class Lazy(torch.Tensor):
        pass

    assert checks(compare(expected, torch.ones(4, 1).as_subclass(Lazy), tolerance_for(torch.float32))[0]) == ["output_type"]
    assert checks(compare(expected, expected.numpy(), tolerance_for(torch.float32))[0]) == ["output_type"]


def test_nan_and_infinity_only_where_the_reference_has_them():
    expected = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    assert compare(expected, expected.clone(), tolerance_for(torch.float32))[0] == []
    for position, value in [(0, float("nan")), (1, 1.0), (2, -float("inf")), (3, 5.0)]:
        actual = expected.clone()
        actual[position] = value
        assert "non_finite" in checks(compare(expected, actual, tolerance_for(torch.float32))[0]), (position, value)


def test_integer_outputs_must_be_equal():
    expected = torch.tensor([1, 2, 3])
    assert compare(expected, expected.clone(), tolerance_for(torch.int64))[0] == []
    findings = compare(expected, torch.tensor([1, 2, 4]), tolerance_for(torch.int64))[0]
    assert checks(findings) == ["mismatch"] and "output[2] = 4" in findings[0].message


def test_max_errors_are_reported():
    expected = torch.tensor([1.0, 2.0])
    _, max_abs, max_rel = compare(expected, torch.tensor([1.0, 2.0001]), tolerance_for(torch.float32))
    assert math.isclose(max_abs, 1e-4, rel_tol=1e-2) and math.isclose(max_rel, 5e-5, rel_tol=1e-2)


def test_compare_outputs_adds_plugin_checks(register_plugin):
    from kz_core.evaluate.correctness import compare_outputs
    from kz_core.hookspecs import hookimpl

    class Strict:
        @hookimpl
        def check_outputs(self, actual):
            return [Finding("always_odd", "a plugin's own check")] if float(actual[0].sum()) % 2 else []

    register_plugin(Strict(), "strict-test")
    pm = get_plugin_manager()
    problem = Problem("p", "")
    findings, max_abs, _ = compare_outputs(problem, [torch.ones(3)], [torch.ones(3)], pm=pm, table="default", atol=-1, rtol=-1, label="trial 1")
    assert checks(findings) == ["mismatch.always_odd"] and findings[0].message.startswith("trial 1: ")
    assert max_abs == 0.0
    findings, _, _ = compare_outputs(problem, [torch.ones(3)], [torch.ones(5)], pm=pm, table="default", atol=-1, rtol=-1, label="trial 1")
    assert checks(findings) == ["shape", "mismatch.always_odd"]


def test_chunked_comparison_reports_global_indices_and_counts(monkeypatch):
    from kz_core.evaluate import correctness

    monkeypatch.setattr(correctness, "CHUNK_ELEMENTS", 7)
    expected = torch.arange(60, dtype=torch.float32).reshape(6, 10)
    actual = expected.clone()
    actual[3, 4] += 1.0
    actual[5, 9] += 1.0
    actual[4, 0] = float("nan")
    findings, max_abs, _ = compare(expected, actual, tolerance_for(torch.float32))
    assert checks(findings) == ["non_finite", "mismatch"]
    assert "output[4, 0] = nan" in findings[0].message
    assert "output[3, 4]" in findings[1].message and "2 of 60 elements" in findings[1].message
    assert max_abs == 1.0
