"""The Python API the RL reward calls: concurrent, async-friendly, failures as results."""

from __future__ import annotations

import pytest

import asyncio

from kz_core.evaluate import Evaluator
from kz_core.evaluate.journal import Journal
from kz_core.model import Candidate, Verdict

from .conftest import eval_config, example_candidates


@pytest.mark.triton
def test_evaluate_async_runs_batches_concurrently(cpu_evaluator):
    good = example_candidates()[:2]
    broken = [Candidate("1_vector_add", "triton", "def broken(:", "syntax"), Candidate("nope", "triton", "x = 1", "unknown")]

    async def main():
        return await asyncio.gather(cpu_evaluator.evaluate_async(good), cpu_evaluator.evaluate_async(broken))

    first, second = asyncio.run(main())
    assert [r.verdict for r in first] == [Verdict.CORRECT, Verdict.CORRECT]
    for result in first:  # every stage of a correct candidate says how long it took
        t = result.timings
        stages = [t.static_s, t.reference_s, t.waiting_s, t.compile_s, t.correctness_s, t.timing_s]
        assert None not in stages, t
        assert t.baseline_s is None  # on a CPU there are no baselines
        assert sum(stages) <= t.total_s
    # Where the workers' time went, request by request (benchmarks/eval_throughput.py prints it).
    requests = cpu_evaluator.contention.requests()
    assert {"candidate record", "executor prepare", "executor execute", "executor execute: replay", "executor execute: draw inputs"} <= set(requests), requests
    assert {"candidate record: warm-up calls", "candidate record: recorded calls", "candidate record: gap calls", "executor execute: keep inputs", "executor execute: poison", "reference reference: draw inputs", "reference reference: reference calls"} <= set(requests), requests
    # A large model's load and the executor's taking of its constants (75 s of a compile
    # stage on an H100, forty-third session) say where their time goes too.
    assert {"candidate load: compile", "candidate load: instantiate", "executor prepare: build kernels", "executor prepare: take plans"} <= set(requests), requests
    assert all(r["count"] >= 1 and r["total_s"] >= r["max_s"] >= 0 for r in requests.values())
    assert requests["executor execute"]["total_s"] >= requests["executor execute: replay"]["total_s"]
    assert [r.verdict for r in second] == [Verdict.FORMAT_ERROR, Verdict.FORMAT_ERROR]
    assert [f.check for f in second[0].findings] == ["syntax_error"]
    assert [f.check for f in second[1].findings] == ["unknown_problem"]


@pytest.mark.triton
def test_the_journal_resumes_without_starting_workers(example_problems, tmp_path):
    candidates = example_candidates()[:2]
    with Journal(tmp_path / "journal.sqlite") as journal:
        with Evaluator(example_problems, eval_config(), journal=journal) as evaluator:
            first = evaluator.evaluate(candidates)
        with Evaluator(example_problems, eval_config("eval.cache=true"), journal=journal) as evaluator:
            again = evaluator.evaluate(candidates)
            assert evaluator._candidate_pool.started == 0
    assert again == first


@pytest.mark.triton
def test_candidates_spread_over_every_device(example_problems, tmp_path):
    """``eval.devices``: a lane per device, each with its own workers and references (here
    two CPU lanes standing in for two GPUs); a problem's candidates stay on its lane while
    that lane has room, the journal is kept once, and the results are those of one device."""
    candidates = example_candidates()[:4]
    config = eval_config("eval.workers=1", "eval.devices=[cpu,cpu]", "eval.cache=true")
    with Journal(tmp_path / "journal.sqlite") as journal, Evaluator(example_problems, config, journal=journal) as evaluator:
        assert evaluator.device == "cpu,cpu" and evaluator.workers == 2 and len(evaluator.lanes) == 2
        assert evaluator.lane_for("1_vector_add") is evaluator.lane_for("1_vector_add")  # its home while not full
        results = evaluator.evaluate(candidates)
        assert [r.verdict for r in results] == [Verdict.CORRECT] * len(candidates), [r.message for r in results]
        assert all(count > 0 for count in evaluator.lane_counts) and sum(evaluator.lane_counts) == 4
        assert evaluator.evaluate(candidates) == results and evaluator.reused == 4  # from the one journal
        assert sum(evaluator.lane_counts) == 4
        assert {lane.device for lane in evaluator.lanes} == {"cpu"} and evaluator.lanes[0].seeds is not evaluator.lanes[1].seeds


def test_a_gpu_listed_twice_is_a_usage_error():
    from kz_core.evaluate.evaluator import EvaluatorError, resolve_devices

    with pytest.raises(EvaluatorError, match="more than once|no CUDA GPU"):
        resolve_devices(eval_config("eval.devices=[cuda:0,cuda:0]"))
    assert resolve_devices(eval_config("eval.devices=[cpu,cpu]")) == ["cpu", "cpu"]
    assert resolve_devices(eval_config()) == ["cpu"]
