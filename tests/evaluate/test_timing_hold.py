"""A candidate's baselines are timed in its own exclusive hold of the GPU lock.

Written against the version before, where each baseline took the lock on its own after the
candidate's timing had released it: every exclusive take waits for all shared holders to
finish and stops new ones meanwhile, and on the H200 (KernelBench level 1) the 199 takes
of 100 candidates waited 440 s for 145 s held. Here the evaluator's GPU path through
``Evaluator._time`` runs on the CPU, its timing requests and baselines forged.
"""

from __future__ import annotations

import pytest

from kz_core.evaluate.references import ReferenceRecord
from kz_core.evaluate.timing import GRAPH_CLOCK
from kz_core.model import Finding, RuntimeStats, Severity

from .conftest import eval_config


def _stats(clock: str, median_ms: float, unseen: bool = False) -> RuntimeStats:
    return RuntimeStats(median_ms=median_ms, iqr_ms=0.01, min_ms=median_ms, trials=10, clock=clock, unseen_ms=median_ms if unseen else None)


@pytest.mark.parametrize("baseline_captured", [True, False], ids=["graph baselines", "a baseline not captured"])
def test_baselines_are_timed_in_the_candidates_exclusive_hold(monkeypatch, example_problems, baseline_captured):
    from kz_core.evaluate import Evaluator
    from kz_core.serialization import to_json_dict

    problems = [p for p in example_problems if p.name == "1_vector_add"]
    with Evaluator(problems, eval_config("eval.baselines=[eager,compile]", "eval.timing_method=graph")) as evaluator:
        evaluator.device = "cuda"  # the GPU's path through _time; nothing here runs on a GPU
        gpu = evaluator._gpu
        timings: list[str] = []  # the candidate's timing requests, by method
        timed_baselines: list[tuple[str, str, bool]] = []  # (mode, method, in an exclusive hold)
        cache: dict[tuple[str, str], RuntimeStats] = {}

        def time_candidate(worker, problem, reference, settings, findings, verified=False, then=None):
            clock = GRAPH_CLOCK if settings.method == "graph" else "cuda_events"
            reply = {"stats": to_json_dict(_stats(clock, 1.0, unseen=True))}
            with gpu.exclusive():
                timings.append(settings.method)
                if then is not None:
                    then(reply)
            return reply, None

        def baseline(problem, mode, findings, settings=None, alone=False):
            key = (mode, settings.method)
            if key not in cache:  # kept, as ReferenceService.baseline keeps them
                timed_baselines.append((mode, settings.method, gpu.held_exclusive()))
                graph = settings.method == "graph" and (baseline_captured or mode == "eager")
                cache[key] = _stats(GRAPH_CLOCK if graph else "cuda_events", 2.0)
                if settings.method == "graph" and not graph:
                    findings.append(Finding("baseline", f"the {mode} baseline fell back to events", Severity.WARNING))
            return cache[key]

        monkeypatch.setattr(evaluator, "_time_candidate", time_candidate)
        monkeypatch.setattr(evaluator.references, "baseline", baseline)
        seed = evaluator.seeds.timing[0]
        reference = ReferenceRecord(trials={seed: {"input_bytes": 1 << 20, "output_meta": [{"nbytes": 1 << 20}]}})
        findings: list[Finding] = []
        fields = evaluator._time(None, problems[0], reference, findings, verified=True)

    assert timed_baselines and all(held for _, _, held in timed_baselines), timed_baselines
    assert not gpu.held_exclusive()
    if baseline_captured:
        assert timings == ["graph"]
        assert timed_baselines == [("eager", "graph", True), ("compile", "graph", True)]
        assert {mode: stats.clock for mode, stats in fields["baselines"].items()} == {"eager": GRAPH_CLOCK, "compile": GRAPH_CLOCK}
    else:
        # The compile baseline could not be captured: the candidate is timed again with
        # events, and the events baselines are timed in that second hold.
        assert timings == ["graph", "events"]
        assert [(mode, method) for mode, method, _ in timed_baselines] == [("eager", "graph"), ("compile", "graph"), ("eager", "events"), ("compile", "events")]
        assert fields["runtime"].clock == "cuda_events"
        assert {stats.clock for stats in fields["baselines"].values()} == {"cuda_events"}
        # What the baselines timed in the hold found wrong still reaches the result.
        assert [f.message for f in findings if f.check == "baseline"] == ["the compile baseline fell back to events"], findings
    assert fields["speedups"] == {"eager": 2.0, "compile": 2.0}
    # The baselines' seconds are counted as baseline time, not as the candidate's timing.
    assert fields["timing_s"] >= 0 and fields["baseline_s"] >= 0

