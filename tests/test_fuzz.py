"""Fuzzing: strategies from the problem, deterministic inputs, shrunk failures, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import hypothesis
import pytest
import torch
from hypothesis import given, settings

from kz_core.config import load_config
from kz_core.evaluate import execution
from kz_core.fuzz import DTYPES, FuzzExample, FuzzFailure, FuzzSession, _special_sizes, examples, fuzz_candidate, sizes
from kz_core.model import Candidate
from kz_core.problems import load_problems

#: These tests evaluate Triton kernels: without kz-backend-triton they skip (tests/conftest.py).
pytestmark = pytest.mark.triton

REPO = Path(__file__).resolve().parents[1]
PROBLEMS = {p.name: p for p in load_problems("examples").problems}
GOOD_ADD = (REPO / "examples" / "candidates" / "triton" / "1_vector_add.py").read_text()
GOOD_SUM = (REPO / "examples" / "candidates" / "triton" / "4_row_sum.py").read_text()

# Right at the default size only: the grid is fixed for 5000 elements (5 blocks of 1024).
FIXED_GRID = GOOD_ADD.replace("grid = (triton.cdiv(n_elements, BLOCK_SIZE),)", "grid = (5,)")
# Right for contiguous inputs only: it keeps the input's strides but assumes unit column stride.
CONTIGUOUS_ONLY = GOOD_SUM.replace("x.contiguous().view(-1, n_cols)", "x.reshape(-1, n_cols)")


def cpu_config(*overrides: str):
    return load_config(None, ["eval.device=cpu", "eval.workers=1", "eval.cache=false", *overrides]).eval


def test_the_test_candidates_differ_from_the_honest_ones():
    assert FIXED_GRID != GOOD_ADD and CONTIGUOUS_ONLY != GOOD_SUM


def test_special_sizes_include_boundaries_and_stay_in_range():
    specials = _special_sizes(5000)
    assert {1, 2, 3, 4999, 5001, 1023, 1025} <= set(specials) and max(specials) <= 10000
    assert 5003 in specials  # the next prime after 5000
    assert _special_sizes(4) == [1, 2, 3, 5, 7]


@settings(max_examples=50, deadline=None)
@given(sizes(PROBLEMS["5_matmul"]))
def test_sizes_rebind_every_constant_within_the_memory_budget(drawn):
    assert set(drawn) == {"M", "K", "N"}
    assert all(1 <= v <= 2 * {"M": 96, "K": 80, "N": 72}[k] for k, v in drawn.items())
    assert drawn["M"] * drawn["K"] * drawn["N"] <= 4 * 96 * 80 * 72


@settings(max_examples=40, deadline=None)
@given(examples(PROBLEMS["3_row_softmax"], dtypes=True, device="cpu"))
def test_fuzz_inputs_are_deterministic_and_keep_shapes(example):
    module = type(sys)("p")
    exec(PROBLEMS["3_row_softmax"].code, module.__dict__)
    for name, value in example.overrides.items():
        setattr(module, name, value)
    first = execution.fuzz_inputs(module, _as_dict(example), "cpu")
    again = execution.fuzz_inputs(module, _as_dict(example), "cpu")
    assert len(first) == 1 and torch.equal(first[0], again[0])
    x = first[0]
    assert x.shape == (example.overrides.get("rows", 64), example.overrides.get("cols", 257))
    assert x.dtype == (getattr(torch, example.dtype) if example.dtype else torch.float32)
    assert example.dtype in DTYPES  # bfloat16 too: kz mends the interpreter's bfloat16
    if example.layout != "contiguous":
        assert not x.is_contiguous() or x.numel() <= 1 or min(x.shape) == 1
    if example.distribution == "zeros":
        assert not bool(x.any())


def _as_dict(example: FuzzExample) -> dict:
    import attrs

    return attrs.asdict(example)


def test_non_negative_inputs_stay_non_negative():
    value = torch.rand(100)
    generator = torch.Generator().manual_seed(1)
    for distribution in execution.DISTRIBUTIONS:
        assert bool((execution._redistribute(value, distribution, generator) >= 0).all()), distribution


def test_correct_kernels_survive_two_hundred_examples():
    report = fuzz_candidate(PROBLEMS["1_vector_add"], Candidate("1_vector_add", "triton", GOOD_ADD), max_examples=200, seed=7, config=cpu_config())
    assert report.passed, report.failure or report.error
    assert report.examples >= 200


def test_a_kernel_right_only_at_the_default_size_is_caught_and_shrunk():
    report = fuzz_candidate(PROBLEMS["1_vector_add"], Candidate("1_vector_add", "triton", FIXED_GRID), max_examples=100, seed=3, config=cpu_config())
    assert not report.passed and report.example is not None
    # The smallest failing size is one past what the fixed grid covers (5 blocks of 1024).
    assert report.example.overrides == {"n": 5121}, report.example
    # The element no block writes reads back NaN: the trials fill an output allocated with
    # torch.empty with all bits set (before, on a CPU, whatever the memory held: a mismatch).
    assert "non_finite" in report.failure and "output[5120] = nan" in report.failure


def test_a_kernel_that_assumes_contiguous_inputs_is_caught():
    report = fuzz_candidate(PROBLEMS["4_row_sum"], Candidate("4_row_sum", "triton", CONTIGUOUS_ONLY), max_examples=100, seed=5, config=cpu_config())
    assert not report.passed and report.example is not None
    assert report.example.layout != "contiguous"


def test_session_check_for_users_own_hypothesis_tests():
    with FuzzSession(PROBLEMS["1_vector_add"], Candidate("1_vector_add", "triton", FIXED_GRID), cpu_config()) as session:
        session.check(FuzzExample(overrides={"n": 100}, seed=1))
        with pytest.raises(FuzzFailure, match="n=6000"):
            session.check(FuzzExample(overrides={"n": 6000}, seed=1))


def test_an_honest_kernel_passes_bfloat16_examples_on_the_cpu():
    """Triton's interpreter computed bfloat16 on its bit patterns (an honest bfloat16
    softmax came out wrong on a CPU) and refused its atomics; with kz's mends an honest
    kernel passes bfloat16 examples there, so a CPU's fuzzing now draws them (written
    against the version that left them out)."""
    found = hypothesis.find(examples(PROBLEMS["3_row_softmax"], dtypes=True, device="cpu"), lambda example: example.dtype == "bfloat16")
    assert found.dtype == "bfloat16"
    softmax = (REPO / "examples" / "candidates" / "triton" / "3_row_softmax.py").read_text()
    with FuzzSession(PROBLEMS["3_row_softmax"], Candidate("3_row_softmax", "triton", softmax), cpu_config()) as session:
        for seed in range(3):
            session.check(FuzzExample(overrides={"rows": 5, "cols": 33 + seed}, dtype="bfloat16", seed=seed))


# Unstable (no max subtraction) unless a peek at eight input elements, outside torch's
# dispatcher, finds them large: the path is chosen by the values of the inputs it is
# recorded on.
VALUE_GUARDED_SOFTMAX = """
import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def fast_kernel(x_ptr, out_ptr, cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + offs, mask=offs < cols, other=-float("inf"))
    e = tl.exp(x)
    tl.store(out_ptr + row * stride + offs, e / tl.sum(e, axis=0), mask=offs < cols)


@triton.jit
def safe_kernel(x_ptr, out_ptr, cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + offs, mask=offs < cols, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * stride + offs, e / tl.sum(e, axis=0), mask=offs < cols)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        safe = float(np.abs(x.detach().cpu().numpy().reshape(-1)[:8]).max(initial=0.0)) > 60.0
        kernel = safe_kernel if safe else fast_kernel
        kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        return out
"""


def test_a_path_chosen_by_the_inputs_values_is_replayed_on_the_examples_values():
    """Written against the version before, which recorded a fuzz example's plan on decoys
    of the example's own value distribution: a softmax that is unstable unless a peek at a
    few elements finds them large recorded its safe path on "large" decoys and passed the
    "large" example (and, with the plan cached without the distribution, passed or failed
    by which example came first). Decoys now have the default values, so the plan takes the
    path those chose and the example's large values overflow it."""
    with FuzzSession(PROBLEMS["3_row_softmax"], Candidate("3_row_softmax", "triton", VALUE_GUARDED_SOFTMAX), cpu_config()) as session:
        with pytest.raises(FuzzFailure, match="non_finite"):
            session.check(FuzzExample(distribution="large", seed=3))


def kz(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kz_core.cli", *args], capture_output=True, text=True, cwd=cwd, env={**os.environ, "COLUMNS": "200"})


@pytest.mark.slow
def test_kz_fuzz_saves_the_failing_case_and_replays_it(tmp_path):
    candidates = tmp_path / "c.jsonl"
    rows = [{"problem": "1_vector_add", "code": FIXED_GRID, "sample_id": "fixed"}, {"problem": "1_vector_add", "code": GOOD_ADD, "sample_id": "good"}]
    candidates.write_text("".join(json.dumps(r) + "\n" for r in rows))
    completed = kz("fuzz", "-c", str(candidates), "-n", "60", "--seed", "3", "--device", "cpu", "--json", f"run.root={tmp_path}", cwd=tmp_path)
    assert completed.returncode == 1, completed.stderr  # a candidate failed: like pytest, status 1
    reports = {r["sample_id"]: r for r in map(json.loads, completed.stdout.splitlines())}
    assert reports["good"]["failure"] == "" and reports["fixed"]["failure"]
    case = tmp_path / "fuzz-c" / "cases" / "1_vector_add__fixed.json"
    assert json.loads(case.read_text())["example"]["overrides"] == {"n": 5121}
    assert f"--replay {case}" in completed.stderr
    replayed = kz("fuzz", "-c", str(candidates), "--device", "cpu", "--replay", str(case), cwd=tmp_path)
    assert "fails" in replayed.stdout and "output[5120]" in replayed.stdout
    assert replayed.returncode == 1, replayed.stderr
    good = candidates.with_name("good.jsonl")
    good.write_text(json.dumps(rows[1]) + "\n")
    passing = kz("fuzz", "-c", str(good), "-n", "10", "--seed", "3", "--device", "cpu", f"run.root={tmp_path}", cwd=tmp_path)
    assert passing.returncode == 0, passing.stderr
    # The same command again: both reports from the run's journal, the same outcome and status.
    again = kz("fuzz", "-c", str(candidates), "-n", "60", "--seed", "3", "--device", "cpu", "--json", f"run.root={tmp_path}", cwd=tmp_path)
    assert again.returncode == 1 and "2 of 2 reports came from the run's journal" in again.stderr
    assert {r["sample_id"]: r["failure"] for r in map(json.loads, again.stdout.splitlines())} == {k: v["failure"] for k, v in reports.items()}


@pytest.mark.slow
def test_kz_eval_fuzz_makes_a_fuzz_failure_incorrect():
    from kz_core.evaluate import Evaluator
    from kz_core.model import Severity, Verdict

    with Evaluator(PROBLEMS.values(), cpu_config("eval.fuzz=60", "eval.timing=false")) as evaluator:
        bad, good = evaluator.evaluate([Candidate("4_row_sum", "triton", CONTIGUOUS_ONLY, "bad"), Candidate("4_row_sum", "triton", GOOD_SUM, "good")])
    assert bad.verdict is Verdict.INCORRECT, bad.message
    assert [f.check for f in bad.findings if f.severity is Severity.ERROR] == ["fuzz"]
    assert good.verdict is Verdict.CORRECT, good.message
    assert any(f.check == "fuzz" and f.message.startswith("passed 60") for f in good.findings)


def test_the_evaluator_and_the_fuzzer_do_not_import_each_other():
    """The evaluator runs the fuzzing engine (eval.fuzz); only the public kz_core.fuzz
    builds evaluators: no module of kz_core.evaluate imports kz_core.fuzz."""
    import ast

    package = Path(__file__).resolve().parents[1] / "kz_core" / "evaluate"
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "kz_core.fuzz" or isinstance(node, ast.Import) and any(a.name == "kz_core.fuzz" for a in node.names):
                raise AssertionError(f"{path.name} imports kz_core.fuzz")
    engine = (package / "fuzzing.py").read_text()
    assert "import Evaluator" not in engine


def test_shrinking_stops_after_its_budget_and_reports_the_smallest_so_far():
    """A kernel whose failures cost a worker each would shrink for minutes: after the
    budget, untried examples count as passing and the smallest failure found is reported."""
    from kz_core.evaluate import Evaluator

    problem = PROBLEMS["1_vector_add"]
    with Evaluator([problem], cpu_config()) as evaluator, FuzzSession(problem, Candidate("1_vector_add", "triton", FIXED_GRID, "fixed"), evaluator=evaluator) as session:
        report = session.run(60, seed=3, shrink_s=0.0)
    assert report.failure and report.failure.endswith("(shrinking stopped after 0 s)")
    assert report.examples < 60
