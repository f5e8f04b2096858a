"""The GPU memory budget (kz_core/evaluate/memory.py) and the lock statistics.

Written against the version before it: large problems took one lock (one at a time from
trials to timing) while their recordings and first references ran unbudgeted, and on an
H200 four workers ran the GPU out of memory (honest KernelBench candidates failed with
"CUDA out of memory" at 64 to 96 GB in one candidate worker)."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time

import attrs
import pytest

from kz_core.evaluate.contention import Contention
from kz_core.evaluate.memory import MemoryBudget, budget_bytes

from .conftest import reference_pool


def _eventually(condition, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.01)


def test_reservations_that_fit_run_together_and_one_that_does_not_waits():
    budget = MemoryBudget(100, Contention())
    release = threading.Event()
    inside: list[str] = []

    def hold(name: str, nbytes: int) -> None:
        with budget.reserve(nbytes):
            inside.append(name)
            release.wait(30)

    threads = [threading.Thread(target=hold, args=(name, 40)) for name in ("a", "b", "c")]
    for thread in threads:
        thread.start()
    _eventually(lambda: len(inside) == 2)
    time.sleep(0.1)
    assert len(inside) == 2 and budget.used == 80  # the third would pass 100: it waits
    release.set()
    for thread in threads:
        thread.join(30)
    assert sorted(inside) == ["a", "b", "c"] and budget.used == 0


def test_first_come_first_served_a_large_request_is_not_starved():
    """A waiting large reservation blocks later small ones, which would otherwise keep
    the budget busy forever."""
    budget = MemoryBudget(100)
    order: list[str] = []
    first = budget.reserve(60)
    first.__enter__()
    large = threading.Thread(target=lambda: (budget.reserve(90).__enter__(), order.append("large")))
    large.start()
    time.sleep(0.1)
    small = threading.Thread(target=lambda: (budget.reserve(10).__enter__(), order.append("small")))
    small.start()
    time.sleep(0.1)
    assert order == []  # 10 more would fit, but the large one asked first
    first.__exit__(None, None, None)
    large.join(30)
    small.join(30)
    assert order == ["large", "small"]  # then 90 + 10 fits


def test_with_overtakes_requests_that_fit_pass_a_waiting_one_a_bounded_number_of_times():
    """eval.reservation_overtakes: a later request that fits goes before one that does not
    fit yet, but each waiting request is passed at most that many times, then blocks
    everyone behind it (written against the strict order, where the small ones waited
    behind the large one with room to spare)."""
    budget = MemoryBudget(100, overtakes=2)
    order: list[str] = []
    first = budget.reserve(60)
    first.__enter__()
    held: dict[str, object] = {}

    def take(name: str, nbytes: int) -> None:
        held[name] = budget.reserve(nbytes)
        held[name].__enter__()
        order.append(name)

    large = threading.Thread(target=take, args=("large", 90))
    large.start()
    time.sleep(0.1)
    for name in ("small1", "small2", "small3"):
        threading.Thread(target=take, args=(name, 10)).start()
        time.sleep(0.1)
    assert order == ["small1", "small2"] and budget.used == 80  # the third fits too, but the large one was passed twice
    first.__exit__(None, None, None)
    for name in ("small1", "small2"):
        held[name].__exit__(None, None, None)
    _eventually(lambda: order[2:] == ["large", "small3"])
    assert budget.used == 100


def test_a_budget_adds_up_the_bytes_and_seconds_its_reservations_held():
    """What benchmarks/eval_throughput.py divides by the capacity: the least time a batch's
    reservations could have taken, to say how far a run is from being memory-bound."""
    budget = MemoryBudget(100)
    assert budget.byte_seconds == 0
    with budget.reserve(40):
        time.sleep(0.1)
    with budget.reserve(500):  # capped at the capacity
        time.sleep(0.1)
    assert budget.byte_seconds >= 40 * 0.1 + 100 * 0.1
    unbudgeted = MemoryBudget(0)
    with unbudgeted.reserve(10) as held:  # no budget: nothing counted
        assert held == 0
    assert unbudgeted.byte_seconds == 0


def test_memory_set_aside_is_out_of_reach_and_a_smaller_set_aside_lets_a_waiting_request_go():
    """The share of the candidates that reserve nothing (``set_aside``), changed while
    requests wait: less lets a waiting one go; more holds new ones back, takes nothing
    back, and caps a request asked before at what is left when it is granted (written
    against a fixed capacity, where the set-aside was subtracted once)."""
    gib = 1 << 30
    budget = MemoryBudget(100 * gib, set_aside=40 * gib)
    assert budget.capacity == 60 * gib
    order: list[str] = []
    held: dict[str, object] = {}

    def take(name: str, nbytes: int) -> None:
        held[name] = budget.reserve(nbytes)
        order.append(f"{name}={held[name].__enter__() // gib}")

    first = budget.reserve(50 * gib)
    assert first.__enter__() == 50 * gib
    waiting = threading.Thread(target=take, args=("second", 30 * gib))
    waiting.start()
    time.sleep(0.1)
    assert order == []  # 80 would pass 60
    budget.set_aside(10 * gib)
    waiting.join(30)
    assert order == ["second=30"] and budget.used == 80 * gib and budget.capacity == 90 * gib
    budget.set_aside(50 * gib)  # nothing granted is taken back
    assert budget.used == 80 * gib and budget.capacity == 50 * gib
    whole = threading.Thread(target=take, args=("whole", 1000 * gib))
    whole.start()
    time.sleep(0.1)
    assert order == ["second=30"]
    first.__exit__(None, None, None)
    held["second"].__exit__(None, None, None)
    whole.join(30)
    assert order == ["second=30", "whole=50"]  # capped at the capacity when granted, not when asked (90)
    held["whole"].__exit__(None, None, None)
    budget.set_aside(1000 * gib)  # never below 1 GiB: a GPU's budget stays one
    assert budget.capacity == gib and MemoryBudget(0, set_aside=5).capacity == 0


@pytest.mark.parametrize("mode", ["workers", "in_flight"])
def test_with_in_flight_set_aside_a_large_problems_candidate_frees_a_share_while_in_flight(mode, tmp_path):
    """``eval.reservation_set_aside=in_flight``: a candidate in flight of a problem that
    reserves GPU memory frees one worker's share of the memory set aside for the others,
    until it ends, failed or not; a small problem's frees nothing; ``workers`` (the
    default) never changes it. On an H100 with 8 workers the shares were 12.9 of 40.5 GB."""
    from kz_core.config import EvalConfig
    from kz_core.evaluate import Evaluator
    from kz_core.evaluate.references import ReferenceRecord
    from kz_core.model import Candidate, Problem

    config = EvalConfig(device="cpu", workers=2, scratch_dir=str(tmp_path), reservation_set_aside=mode)
    share = 3 << 29  # eval.reservation_footprints (1.5) times eval.large_problem_mb (1 GiB)
    large = ReferenceRecord(trials={1: {"input_bytes": 2 << 30, "output_meta": []}})
    small = ReferenceRecord(trials={1: {"input_bytes": 1 << 20, "output_meta": []}})
    with Evaluator([Problem("p", "x = 1")], config) as evaluator:
        budget = MemoryBudget(100 << 30, set_aside=2 * share)
        evaluator.device, evaluator._memory = "cuda:0", budget  # as on a GPU, without one
        assert evaluator._set_aside_share() == share
        seen: list[int] = []
        release = threading.Event()

        def evaluate_pinned(candidate, compile_only=False, reference=large, fail=False):
            evaluator._note_large(reference)
            evaluator._note_large(reference)  # counted once per candidate
            seen.append(budget.capacity)
            release.wait(30)
            if fail:
                raise RuntimeError("the candidate's evaluation failed")
            return candidate.sample_id

        try:
            evaluator._evaluate_pinned = evaluate_pinned
            threads = [threading.Thread(target=evaluator._evaluate, args=(Candidate("p", "triton", "", name),)) for name in ("a", "b")]
            for thread in threads:
                thread.start()
            _eventually(lambda: len(seen) == 2)
            freed = budget.capacity - (100 << 30) + 2 * share
            release.set()
            for thread in threads:
                thread.join(30)
            assert freed == (2 * share if mode == "in_flight" else 0)
            assert budget.capacity == (100 << 30) - 2 * share
            seen.clear()
            release.clear()
            evaluator._evaluate_pinned = lambda candidate, compile_only=False: evaluate_pinned(candidate, reference=small)
            release.set()
            evaluator._evaluate(Candidate("p", "triton", "", "c"))
            assert seen == [(100 << 30) - 2 * share]  # a small problem's candidate frees nothing
            seen.clear()
            evaluator._evaluate_pinned = lambda candidate, compile_only=False: evaluate_pinned(candidate, fail=True)
            with pytest.raises(RuntimeError):
                evaluator._evaluate(Candidate("p", "triton", "", "d"))
            assert seen == [(100 << 30) - (share if mode == "in_flight" else 2 * share)]
            assert budget.capacity == (100 << 30) - 2 * share and evaluator._large_in_flight == 0
        finally:
            evaluator.device = "cpu"


def test_the_evaluator_reserves_the_configured_footprints_for_a_large_problem(tmp_path):
    from kz_core.config import EvalConfig
    from kz_core.evaluate import Evaluator
    from kz_core.evaluate.references import ReferenceRecord
    from kz_core.model import Problem

    config = EvalConfig(device="cpu", workers=1, scratch_dir=str(tmp_path), reservation_footprints=3.5, reservation_overtakes=4)
    with Evaluator([Problem("p", "x = 1")], config) as evaluator:
        large = ReferenceRecord(trials={1: {"input_bytes": 2 << 30, "output_meta": []}})
        small = ReferenceRecord(trials={1: {"input_bytes": 1 << 20, "output_meta": []}})
        evaluator.device, evaluator._memory = "cuda:0", MemoryBudget(100 << 30, overtakes=4)  # as on a GPU, without one
        try:
            with evaluator._reservation(large) as held:
                assert held == int(3.5 * large.footprint_bytes) and large.footprint_bytes >= 2 << 30
            with evaluator._reservation(small) as held:
                assert held == 0  # below eval.large_problem_mb
        finally:
            evaluator.device = "cpu"


def test_a_verified_candidates_replay_reservation_can_be_given_back_before_its_timing_unless_alone(tmp_path):
    """The replay's reservation covers the trials, their comparisons and fuzzing; its
    timing holds the GPU lock exclusive, so no neighbour works beside it, and held on it
    sat idle through the wait for that lock (fortieth session, H100: large problems'
    reservations were waited for 657 s and held 688 s of a 379 s run). A candidate
    evaluated again alone keeps its whole turn."""
    from kz_core.config import EvalConfig
    from kz_core.evaluate import Evaluator
    from kz_core.evaluate.references import ReferenceRecord
    from kz_core.model import Problem

    config = EvalConfig(device="cpu", workers=1, scratch_dir=str(tmp_path))
    with Evaluator([Problem("p", "x = 1")], config) as evaluator:
        large = ReferenceRecord(trials={1: {"input_bytes": 2 << 30, "output_meta": []}})
        evaluator.device, evaluator._memory = "cuda:0", MemoryBudget(100 << 30)  # as on a GPU, without one
        try:
            with evaluator._replay_turn(large) as release:
                assert evaluator._memory.used == int(1.5 * large.footprint_bytes)
                release()
                assert evaluator._memory.used == 0
            assert evaluator._memory.used == 0
            evaluator._alone.on = 1
            with evaluator._replay_turn(large) as release:
                assert release is None and evaluator._memory.used == 100 << 30
            assert evaluator._memory.used == 0
        finally:
            evaluator._alone.on = 0
            evaluator.device = "cpu"


def test_a_verified_candidate_gives_its_reservation_back_only_once_judged_correct_and_before_its_timing(tmp_path, monkeypatch):
    from kz_core.evaluate import evaluator as evaluator_module
    from kz_core.evaluate.references import ReferenceRecord
    from kz_core.model import Candidate, Finding, Problem

    class Executor:
        def kill(self):
            events.append("kill")

    events: list[str] = []
    monkeypatch.setattr(evaluator_module, "validate_execution", lambda reply, seeds, reference: reply)
    with _one_problem_evaluator(tmp_path) as evaluator:
        evaluator.config = dataclasses.replace(evaluator.config, fuzz=0)
        monkeypatch.setattr(evaluator, "_time", lambda *args, **kwargs: events.append("time") or {"timing_s": 1.0, "baseline_s": 0.5, "retire": False})
        candidate, problem = Candidate("p", "triton", "", "s"), Problem("p", "x = 1")
        reference = ReferenceRecord(trials={1: {"input_bytes": 2 << 30, "output_meta": []}})
        for verdict in ("correct", "incorrect"):
            events.clear()
            findings = [] if verdict == "correct" else [Finding("mismatch", "wrong")]
            monkeypatch.setattr(evaluator, "_judge", lambda *args, **kwargs: {})
            evaluator._judge_verified(Executor(), candidate, problem, reference, {}, findings, evaluator_module.StageTimings(), 0.0, None, lambda: events.append("release"))
            assert events == (["release", "time", "kill"] if verdict == "correct" else ["kill"]), verdict


def test_the_last_attempt_alone_holds_the_gpu_lock_exclusive_and_ends_idle_workers(tmp_path):
    """Written against the version whose attempt alone held only the whole budget: on an
    80 GB H100 honest copies of three KernelBench level-1 problems ran out of memory again
    beside small problems' candidates (which reserve nothing) and 32 workers' CUDA
    contexts. The last attempt now holds the GPU lock exclusive, so that no other
    candidate's GPU work runs beside it, and ends every idle worker first."""
    import threading
    import time

    from kz_core.config import EvalConfig
    from kz_core.evaluate import Evaluator
    from kz_core.evaluate.references import ReferenceRecord
    from kz_core.model import Problem

    config = EvalConfig(device="cpu", workers=2, scratch_dir=str(tmp_path))
    with Evaluator([Problem("p", "x = 1")], config) as evaluator:
        small = ReferenceRecord(trials={1: {"input_bytes": 1 << 20, "output_meta": []}})
        evaluator._candidate_pool.warm_up(2)
        started = evaluator._candidate_pool.started
        evaluator.device, evaluator._memory = "cuda:0", MemoryBudget(100 << 30)  # as on a GPU, without one
        events: list[str] = []
        try:
            evaluator._alone.on = 1  # the second attempt: the budget, the GPU lock as before
            with evaluator._reservation(small) as held:
                assert held == 100 << 30 and not evaluator._gpu.held_exclusive()
                assert evaluator._candidate_pool._idle.qsize() == 2
            evaluator._alone.on = 2  # the last
            with evaluator._reservation(small) as held:
                assert held == 100 << 30 and evaluator._gpu.held_exclusive()
                assert evaluator._candidate_pool._idle.qsize() == 0 and evaluator._candidate_pool._live == 0
                with evaluator._gpu.shared(), evaluator._gpu.exclusive():  # its own takes inside cost nothing
                    pass

                def neighbour() -> None:
                    with evaluator._gpu.shared():
                        events.append("neighbour on the GPU")

                other = threading.Thread(target=neighbour)
                other.start()
                time.sleep(0.3)
                events.append("alone done")
            other.join(timeout=30)
            assert events == ["alone done", "neighbour on the GPU"]
            assert not evaluator._gpu.held_exclusive() and evaluator._memory.used == 0
            evaluator._alone.on = 0
            with evaluator._reservation(small) as held:
                assert held == 0 and not evaluator._gpu.held_exclusive()  # below eval.large_problem_mb, as before
        finally:
            evaluator._alone.on = 0
            evaluator.device = "cpu"
        with evaluator._candidate_pool.acquire() as worker:  # a worker is started again when needed
            assert not worker.retired and evaluator._candidate_pool.started == started + 1


def test_reservation_settings_are_checked():
    from kz_core.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="reservation_footprints"):
        load_config(None, ["eval.reservation_footprints=0"])
    with pytest.raises(ConfigError, match="reservation_overtakes"):
        load_config(None, ["eval.reservation_overtakes=-1"])
    with pytest.raises(ConfigError, match="reservation_set_aside.*in_flight"):
        load_config(None, ["eval.reservation_set_aside=none"])
    with pytest.raises(ConfigError, match="executor_spares"):
        load_config(None, ["eval.executor_spares=-1"])
    with pytest.raises(ConfigError, match="timed_outputs_compared.*after_hold"):
        load_config(None, ["eval.timed_outputs_compared=later"])


def test_a_reservation_granted_now_or_not_at_all_never_waits_and_never_passes_a_waiting_request():
    """``reserve_now``, asked inside the exclusive timing hold (where waiting for memory
    could deadlock, the lock order being the reservation first): granted only as
    ``reserve`` would grant it at once, else None at once."""
    contention = Contention()
    budget = MemoryBudget(100, contention)
    granted = budget.reserve_now(60)
    assert granted is not None and budget.used == 60  # counted when granted
    with granted as held:
        assert held == 60
        assert budget.reserve_now(50) is None  # does not fit: no wait
        assert budget.used == 60
        with budget.reserve_now(30) as small:
            assert small == 30 and budget.used == 90
    assert budget.used == 0 and contention.snapshot()["gpu memory"]["taken"] == 2
    with budget.reserve_now(500) as capped:  # capped at the capacity, as reserve does
        assert capped == 100
    with MemoryBudget(0).reserve_now(1 << 40) as held:  # no budget
        assert held == 0

    # A request waiting in line is not passed (first come, first served) ...
    first = budget.reserve(80)
    first.__enter__()
    waiting_started = threading.Event()
    done = threading.Event()

    def wait_in_line() -> None:
        waiting_started.set()
        with budget.reserve(50):
            done.set()

    waiter = threading.Thread(target=wait_in_line)
    waiter.start()
    waiting_started.wait(30)
    _eventually(lambda: len(budget._queue) == 1)
    assert budget.reserve_now(10) is None  # it would fit, but the one waiting came first
    # ... unless it may be passed (eval.reservation_overtakes), which counts as a pass.
    budget.overtakes = 1
    with budget.reserve_now(10) as held:
        assert held == 10 and budget._queue[0][1] == 1
        assert budget.reserve_now(5) is None  # passed as often as it may be
    first.__exit__(None, None, None)
    waiter.join(30)
    assert done.is_set() and budget.used == 0


def test_a_request_larger_than_the_budget_runs_alone():
    budget = MemoryBudget(100)
    with budget.reserve(500) as held:
        assert held == 100 and budget.used == 100
    with budget.reserve(0) as held:
        assert held == 0


def test_no_budget_grants_everything_at_once():
    budget = MemoryBudget(0)
    with budget.reserve(1 << 40) as held, budget.reserve(1 << 40) as again:
        assert held == again == 0


def test_budget_bytes_leaves_room_for_contexts():
    total = 141 << 30
    assert budget_bytes(total, 0) == int(total * 0.85)
    assert budget_bytes(total, 10) == int(total * 0.85) - 10 * (640 << 20)
    assert budget_bytes(1 << 30, 100) == 1 << 30  # never below 1 GiB


def test_contention_records_waits_and_holds():
    contention = Contention()
    lock = threading.Lock()
    with contention.hold("a lock", lock) as entered:
        assert entered is True  # what the lock's __enter__ gives
        time.sleep(0.05)
    with contention.hold("a lock", lock):
        pass
    stats = contention.snapshot()["a lock"]
    assert stats["taken"] == 2 and stats["held_s"] >= 0.04
    contention.record_request("executor execute", 0.5)
    contention.record_request("executor execute", 1.5)
    assert contention.requests() == {"executor execute": {"count": 2, "total_s": 2.0, "max_s": 1.5}}
    contention.note_footprint("big", 4 << 30)
    contention.note_footprint("small", 1 << 20)
    contention.record_peak("candidate record", 10 << 30, "big")
    contention.record_peak("candidate record", 6 << 30, "big")
    contention.record_peak("executor execute", 512 << 20, "small")  # under 1 GiB a call: not in footprints
    contention.record_peak("executor execute", 1 << 30, None)
    assert contention.footprint_ratios() == {"candidate record": 2.5}
    assert contention.peaks() == {"candidate record": 10.0, "executor execute": 1.0}
    contention.reset()
    assert contention.snapshot() == {} and contention.requests() == {} and contention.footprint_ratios() == {}


@pytest.mark.parametrize("device", ["cpu"])
def test_a_cpu_evaluator_reserves_nothing(device, tmp_path):
    from kz_core.config import EvalConfig
    from kz_core.evaluate import Evaluator
    from kz_core.evaluate.references import ReferenceRecord
    from kz_core.model import Problem

    with Evaluator([Problem("p", "x = 1")], EvalConfig(device=device, workers=1, scratch_dir=str(tmp_path))) as evaluator:
        assert evaluator.memory_budget().capacity == 0
        big = ReferenceRecord(trials={1: {"input_bytes": 1 << 40, "output_meta": []}})
        with evaluator._reservation(big) as held:
            assert held == 0


ADD = """
import torch

N = 1000


class Model(torch.nn.Module):
    def forward(self, a, b):
        return a + b


def get_inputs():
    return [torch.rand(N), torch.rand(N)]


def get_init_inputs():
    return []
"""


def test_a_reference_worker_finds_a_calls_footprint_on_the_meta_device(tmp_path):
    """What a first reference reserves: one call's bytes from shapes alone (a problem whose
    forward reads values cannot run on the meta device: None, and a fixed share is reserved)."""
    from kz_core.evaluate.calls import call_worker, problem_payload
    from kz_core.model import Problem

    reads_values = ADD.replace("return a + b", "return a + b if bool(a.sum() > 0) else a")
    with reference_pool(tmp_path) as pool:
        for code, expected in ((ADD, 3 * 1000 * 4), (reads_values, None)):
            problem = Problem("p", code)
            with pool.acquire(problem.content_hash) as worker:
                reply, failure = call_worker(worker, {"op": "footprint", "problem": problem_payload(problem), "init_seed": 1}, 60, "footprint")
            assert failure is None and reply["bytes"] == expected


def test_a_comparison_on_the_device_says_where_its_time_went(tmp_path):
    """A comparison recomputes the reference for its seed (outputs too large to keep): its
    reply says how long each part took, for the throughput benchmark (on the H200 the 860
    comparisons of level 1 took 125 s with the GPU shared, with no breakdown). On a CPU no
    output can be shared: the request shares none, which is a finding (the reference
    returns one tensor), and the parts before run all the same."""
    from kz_core.evaluate.calls import call_worker, problem_payload
    from kz_core.model import Problem

    problem = Problem("p", ADD)
    request = {
        "op": "compare", "problem": problem_payload(problem), "init_seed": 1, "seed": 7, "overrides": None, "shared": [],
        "tolerance": {}, "atol": 1e-2, "rtol": 1e-2, "label": "trial 1", "copy": True,
    }
    with reference_pool(tmp_path) as pool, pool.acquire(problem.content_hash) as worker:
        reply, failure = call_worker(worker, request, 60, "comparison")
    assert failure is None and [(f["check"], f["message"]) for f in reply["findings"]] == [("output_type", "trial 1: 0 outputs shared, the reference returns 1")]
    assert set(reply["phases"]) == {"instantiate", "draw inputs", "reference call", "open shared outputs", "compare"}
    assert all(type(seconds) is float and seconds >= 0 for seconds in reply["phases"].values())


def _one_problem_evaluator(tmp_path):
    from kz_core.config import EvalConfig
    from kz_core.evaluate import Evaluator
    from kz_core.model import Problem

    return Evaluator([Problem("p", "x = 1")], EvalConfig(device="cpu", workers=1, scratch_dir=str(tmp_path)))


def _evaluated(evaluator, results):
    """``evaluator.evaluate_one`` of a candidate whose evaluations (``_evaluate``) give
    ``results`` in turn: how alone each attempt ran (``Evaluator._alone_level``), and the
    result."""
    from kz_core.model import Candidate

    attempts: list[int] = []

    def fake(candidate, compile_only=False):
        attempts.append(evaluator._alone_level())
        return results[len(attempts) - 1]

    evaluator._evaluate = fake
    return attempts, evaluator.evaluate_one(Candidate("p", "triton", "", "s"))


def test_a_candidate_that_met_a_full_gpu_is_evaluated_again_alone(tmp_path):
    """A budget is an estimate: a candidate failed by CUDA out of memory is evaluated once
    more with the whole budget (its reservations say so), and keeps that verdict."""
    from kz_core.evaluate.evaluator import ran_out_of_gpu_memory
    from kz_core.model import EvalResult, Finding, Verdict

    oom = Finding("runtime_error", "OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB.")
    failed = EvalResult(problem="p", sample_id="s", backend="triton", verdict=Verdict.RUNTIME_ERROR, findings=(oom,))
    passed = EvalResult(problem="p", sample_id="s", backend="triton", verdict=Verdict.CORRECT)
    assert ran_out_of_gpu_memory(failed) and not ran_out_of_gpu_memory(passed)
    other = EvalResult(problem="p", sample_id="s", backend="triton", verdict=Verdict.RUNTIME_ERROR, findings=(Finding("runtime_error", "ValueError"),))
    assert not ran_out_of_gpu_memory(other)

    with _one_problem_evaluator(tmp_path) as evaluator:
        attempts, result = _evaluated(evaluator, [failed, passed])
        assert attempts == [0, 1] and not evaluator._running_alone()
        assert result.verdict is Verdict.CORRECT and any(f.check == "gpu_memory" for f in result.findings)
        attempts, result = _evaluated(evaluator, [failed, failed, passed])
        assert attempts == [0, 1, 2] and result.verdict is Verdict.CORRECT  # last with the GPU to itself
        assert [f.message for f in result.findings if f.check == "gpu_memory"] == [
            "evaluated a third time with the GPU to itself (no other candidate's work beside it, idle workers ended): "
            "the second attempt ran out of GPU memory too"
        ]
        evaluator._alone_problems.clear()  # as after ALONE_AFTER more candidates: the problem starts from the first attempt again
        attempts, result = _evaluated(evaluator, [failed, failed, failed, failed])
        assert result.verdict is Verdict.RUNTIME_ERROR
        assert attempts == [0, 1, 2]  # twice more, not forever


@pytest.mark.parametrize(
    "finding",
    [
        ("timing_fallback", "timed with CUDA events: out of GPU memory for graph timing"),
        ("baseline", "the eager baseline was timed with CUDA events: out of GPU memory for graph timing; not kept"),
        ("baseline", "the compile baseline could not be timed: OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"),
    ],
    ids=["own graph timing", "a baseline's graph timing", "a baseline failed"],
)
def test_a_correct_candidate_timed_with_less_for_want_of_memory_is_evaluated_again_alone(tmp_path, finding):
    """Written against the version before, where only a failed candidate was evaluated
    again: on the H200 (KernelBench level 1, reservations of 1.5 call footprints) an honest
    candidate whose graph timing ran out of memory beside its neighbours' reservations was
    kept, correct but timed with events (45_Average_Pooling_2D); a baseline that did so was
    kept for every later candidate of its problem."""
    from kz_core.evaluate.evaluator import ran_out_of_gpu_memory
    from kz_core.model import EvalResult, Finding, Severity, Verdict

    weaker = EvalResult(problem="p", sample_id="s", backend="triton", verdict=Verdict.CORRECT, findings=(Finding(*finding, Severity.WARNING),))
    graph = EvalResult(problem="p", sample_id="s", backend="triton", verdict=Verdict.CORRECT)
    assert ran_out_of_gpu_memory(weaker) and not ran_out_of_gpu_memory(graph)
    # A capture that failed for another reason is no reason to evaluate it again.
    uncaptured = Finding("timing_fallback", "timed with CUDA events: the forward synchronises the host", Severity.WARNING)
    assert not ran_out_of_gpu_memory(attrs.evolve(graph, findings=(uncaptured,)))

    with _one_problem_evaluator(tmp_path) as evaluator:
        attempts, result = _evaluated(evaluator, [weaker, graph])
        assert attempts == [0, 1]
        assert [f.check for f in result.findings] == ["gpu_memory"]


@pytest.mark.parametrize("outcome", ["fell back to events", "failed"])
def test_a_baseline_that_ran_out_of_gpu_memory_is_kept_only_when_timed_alone(tmp_path, monkeypatch, example_problems, outcome):
    """A baseline is kept for every later candidate of its problem (in memory and in the
    baseline cache on disk): one that ran out of GPU memory beside other candidates'
    reservations is not, unless it was timed with the GPU's memory to itself."""
    from kz_core.evaluate import Evaluator
    from kz_core.evaluate import references as references_module
    from kz_core.evaluate.evaluator import ran_out_of_gpu_memory
    from kz_core.evaluate.timing import GRAPH_OUT_OF_MEMORY, TimingSettings
    from kz_core.model import EvalResult, Finding, RuntimeStats, Verdict
    from kz_core.serialization import to_json_dict

    from .conftest import eval_config

    monkeypatch.setenv("KZ_CACHE_DIR", str(tmp_path / "cache"))
    problem = next(p for p in example_problems if p.name == "1_vector_add")
    timed: list[str] = []

    def call_worker(worker, request, timeout, stage):
        timed.append(request["mode"])
        if outcome == "failed":
            return None, Finding("runtime_error", "OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB")
        stats = RuntimeStats(median_ms=2.0, iqr_ms=0.1, min_ms=2.0, trials=10, clock="cuda_events", note=f"timed with CUDA events: {GRAPH_OUT_OF_MEMORY}")
        return {"stats": to_json_dict(stats)}, None

    with Evaluator([problem], eval_config("eval.cache=true")) as evaluator:
        service = evaluator.references
        monkeypatch.setattr(references_module, "call_worker", call_worker)
        monkeypatch.setattr(service, "worker", lambda problem, prefer=None: contextlib.nullcontext(None))
        settings = TimingSettings(method="graph")
        findings: list[Finding] = []
        first = service.baseline(problem, "eager", findings, settings)
        assert (first is None) == (outcome == "failed")
        result = EvalResult(problem="p", sample_id="s", backend="triton", verdict=Verdict.CORRECT, findings=tuple(findings))
        assert ran_out_of_gpu_memory(result), findings
        service.baseline(problem, "eager", [], settings)
        assert timed == ["eager", "eager"]  # not kept: timed again
        alone: list[Finding] = []
        service.baseline(problem, "eager", alone, settings, alone=True)
        assert not any("not kept" in f.message for f in alone)
        service.baseline(problem, "eager", [], settings)
        assert timed == ["eager", "eager", "eager"]  # kept since it was timed alone


@pytest.mark.gpu
@pytest.mark.triton
def test_large_problems_at_once_never_run_an_honest_kernel_out_of_gpu_memory():
    """The H200 case that failed honest kernels before the budget: several problems of
    18 GB per call (two 6 GB inputs, a 6 GB output) recorded, replayed, compared and timed
    by four workers at once. Every honest candidate is correct; a candidate that met a full
    GPU anyway was evaluated again alone (and says so)."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")
    from kz_core.evaluate import Evaluator
    from kz_core.model import Candidate, Problem, Verdict

    from .conftest import EXAMPLE_CANDIDATES, REPO, eval_config

    add = (REPO / "examples" / "problems" / "1_vector_add.py").read_text()
    honest = (EXAMPLE_CANDIDATES / "triton" / "1_vector_add.py").read_text()
    problems = [Problem(f"big_add_{i}", add.replace("n = 5000", f"n = {1_500_000_000 + 1024 * i}")) for i in range(4)]
    config = eval_config("eval.device=cuda", "eval.workers=4", "eval.run_timeout_s=600", "eval.baselines=[eager]")
    with Evaluator(problems, config) as evaluator:
        results = evaluator.evaluate([Candidate(p.name, "triton", honest, "honest") for p in problems])
        capacity = evaluator.memory_budget().capacity
    assert capacity > 0
    for result in results:
        assert result.verdict is Verdict.CORRECT, f"{result.problem}: {result.message}"


def test_the_gpu_lock_records_shared_and_exclusive_holds():
    """An exclusive holder waits for shared ones; both are recorded for the benchmark."""
    from kz_core.evaluate.references import SharedExclusiveLock

    contention = Contention()
    lock = SharedExclusiveLock(contention)
    order: list[str] = []
    def take_exclusive() -> None:
        with lock.exclusive():
            order.append("exclusive")

    with lock.shared():
        thread = threading.Thread(target=take_exclusive)
        thread.start()
        time.sleep(0.1)
        assert order == []  # the exclusive one waits for the shared holder
    thread.join(30)
    assert order == ["exclusive"]
    stats = contention.snapshot()
    assert stats["gpu shared"]["taken"] == 1 and stats["gpu shared"]["held_s"] >= 0.09
    assert stats["gpu exclusive"]["waited_s"] >= 0.09



def test_the_exclusive_holder_takes_the_gpu_lock_again_without_waiting_or_recording():
    """A candidate's timing and its baselines' are one exclusive hold: inside it, the
    holder's own shared and exclusive takes neither wait (a deadlock before) nor count as
    takes; another thread's still waits for the whole hold."""
    from kz_core.evaluate.references import SharedExclusiveLock

    contention = Contention()
    lock = SharedExclusiveLock(contention)
    order: list[str] = []

    def take_shared() -> None:
        with lock.shared():
            order.append("other")

    with lock.exclusive():
        assert lock.held_exclusive()
        other = threading.Thread(target=take_shared)
        other.start()
        with lock.exclusive(), lock.shared():
            order.append("again")
        time.sleep(0.1)
        order.append("released")
    other.join(30)
    assert not lock.held_exclusive()
    assert order == ["again", "released", "other"]
    stats = contention.snapshot()
    assert stats["gpu exclusive"]["taken"] == 1 and stats["gpu shared"]["taken"] == 1


def test_a_batch_runs_problems_in_hash_order_two_at_a_time_their_candidates_alternating():
    """Written against name order: KernelBench's activations (19_ReLU ... 32_HardTanh,
    12.8 GB a call each) ran side by side and all waited for the same GPU memory. The
    order is by content hash, which spreads a family's problems through the batch.

    Then against each problem's candidates all together: a sweep's eight candidates of
    one large problem waited for its GPU memory one after another while nothing else ran.
    On a GPU two problems' candidates now alternate (a problem with more candidates than
    its pair finishes alone); one candidate per problem keeps the hash order; on a CPU a
    problem's candidates stay together."""
    from kz_core.evaluate import Evaluator
    from kz_core.evaluate.evaluator import PROBLEMS_TOGETHER
    from kz_core.model import Candidate
    from kz_core.problems import load_problems

    from .conftest import eval_config

    problems = load_problems("examples").problems
    assert PROBLEMS_TOGETHER == 2 and len(problems) >= 3
    by_hash = sorted(problems, key=lambda p: p.content_hash)
    counts = {p.name: 3 if p is by_hash[0] else 2 for p in problems}
    candidates = [Candidate(problem=p.name, backend="triton", code="", sample_id=str(i)) for i in range(3) for p in problems if i < counts[p.name]]
    with Evaluator(problems, eval_config("eval.workers=1")) as evaluator:
        order = evaluator.schedule(candidates, together=PROBLEMS_TOGETHER)  # a GPU's
        singles = evaluator.schedule([Candidate(problem=p.name, backend="triton", code="", sample_id="0") for p in problems], together=PROBLEMS_TOGETHER)
        on_the_cpu = evaluator.schedule(candidates)
    assert [candidates[i].problem for i in on_the_cpu] == [p.name for p in by_hash for _ in range(counts[p.name])]
    a, b = by_hash[0].name, by_hash[1].name
    started = [(candidates[i].problem, candidates[i].sample_id) for i in order]
    assert started[:5] == [(a, "0"), (b, "0"), (a, "1"), (b, "1"), (a, "2")]
    assert sorted(order) == list(range(len(candidates)))
    rest = [name for name, _ in started[5:]]
    assert set(rest) == {p.name for p in by_hash[2:]}
    if len(by_hash) >= 4:
        assert rest[:4] == [by_hash[2].name, by_hash[3].name] * 2
    assert [problems[i].name for i in singles] == [p.name for p in by_hash]
    assert [p.name for p in by_hash] != sorted(p.name for p in problems)  # else this test shows nothing


def test_eval_in_flight_runs_that_many_candidates_at_once_with_one_worker():
    """eval.in_flight: more candidates at once than candidate workers (each holds an
    executor from its start), so one waiting for GPU memory leaves the others going."""
    from kz_core.evaluate import Evaluator
    from kz_core.model import Candidate
    from kz_core.problems import load_problems

    from .conftest import eval_config

    problems = load_problems("examples").problems
    candidates = [Candidate(problem=p.name, backend="triton", code="", sample_id="0") for p in problems]
    for setting, expected, executors in (("eval.in_flight=0", 2, 1), ("eval.in_flight=4", 4, 4)):
        with Evaluator(problems, eval_config("eval.workers=1", setting)) as evaluator:
            inside, most, lock, release = [0], [0], threading.Lock(), threading.Event()

            def hold(candidate, inside=inside, most=most, lock=lock, release=release):
                with lock:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                    if most[0] >= expected:
                        release.set()
                release.wait(60)  # until as many as expected are inside (a bound, not a timing)
                with lock:
                    inside[0] -= 1
                return candidate

            evaluator.evaluate_one = hold  # nothing is evaluated: only how many run at once
            assert evaluator.in_flight == expected and evaluator._executor_pool.size == executors
            evaluator.evaluate(candidates)
            assert most[0] == expected


def test_executor_spares_are_started_ahead_so_that_a_candidate_does_not_wait_for_an_executor_s_start(tmp_path, monkeypatch):
    """Executors are used once. With as many as candidate workers (the default), the
    candidate in flight beyond them waits for one, and on a GPU for its start (1.85 s on
    an H100: 647 s of executor waits in a 470 s sweep, fifty-first session).
    ``eval.executor_spares`` starts more ahead. Modelled with workers whose start is slow:
    a candidate that takes an executor just after another gave one back finds one started
    with a spare; without, it waits for a start."""
    from kz_core.evaluate.evaluator import executor_slots
    from kz_core.evaluate.sandbox import SandboxSettings, WorkerPool

    assert executor_slots(8, 0) == 8 and executor_slots(8, 12) == 12 and executor_slots(8, 0, spares=2) == 10
    assert executor_slots(1, 4) == 4  # eval.in_flight larger than the workers
    start_s = 0.5

    class Worker:
        def __init__(self):
            time.sleep(start_s)  # a start: a CUDA context and the libraries opened
            self.retired, self.uses, self.binding, self.scratch = False, 0, None, tmp_path / "x"

        def kill(self, *, record=True):
            self.retired = True

        def discard_scratch(self):
            pass

    waits = {}
    for label, size in (("no spare", executor_slots(1, 2)), ("a spare", executor_slots(1, 2, spares=1))):
        pool = WorkerPool("cpu", "executor", size, SandboxSettings(scratch_root=tmp_path), single_use=True)
        monkeypatch.setattr(pool, "_start", lambda: Worker())
        pool.warm_up()
        in_use = pool.acquire()
        in_use.__enter__()  # the other candidate in flight
        with pool.acquire():  # a candidate evaluated; its executor ends with it
            pass
        asked = time.perf_counter()
        with pool.acquire():  # the next candidate of that thread, at once
            waits[label] = time.perf_counter() - asked
        in_use.__exit__(None, None, None)
        pool._closed = True
        for thread in pool._starting:
            thread.join(30)
    assert waits["no spare"] >= start_s * 0.5 and waits["a spare"] < start_s * 0.5, waits


def test_a_problem_whose_candidate_needed_the_gpu_to_itself_starts_its_next_ones_there(tmp_path):
    """Written against each candidate finding it out for itself: in a sweep on an H100
    each of the six ``38_L1Norm_`` candidates it reached ran out of GPU memory twice (12
    attempts lost) before its third attempt, with the GPU to itself, passed. Once one needed that,
    the problem's next ``ALONE_AFTER`` candidates start there; those of other problems do
    not, and after them the problem starts from the first attempt again."""
    from kz_core.evaluate.evaluator import ALONE_AFTER, LAST_ALONE
    from kz_core.model import Candidate, EvalResult, Finding, Verdict

    oom = Finding("runtime_error", "OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB.")

    def result(problem, verdict, findings=()):
        return EvalResult(problem=problem, sample_id="s", backend="triton", verdict=verdict, findings=findings)

    with _one_problem_evaluator(tmp_path) as evaluator:
        levels: list[tuple[str, int]] = []
        outcomes: dict[str, list] = {}

        def fake(candidate, compile_only=False):
            levels.append((candidate.sample_id, evaluator._alone_level()))
            return outcomes[candidate.sample_id].pop(0)

        evaluator._evaluate = fake
        outcomes["first"] = [result("p", Verdict.RUNTIME_ERROR, (oom,)), result("p", Verdict.RUNTIME_ERROR, (oom,)), result("p", Verdict.CORRECT)]
        outcomes["second"] = [result("p", Verdict.CORRECT)]
        outcomes["other"] = [result("q", Verdict.CORRECT)]
        first = evaluator.evaluate_one(Candidate("p", "triton", "", "first"))
        second = evaluator.evaluate_one(Candidate("p", "triton", "", "second"))
        other = evaluator.evaluate_one(Candidate("q", "triton", "", "other"))
        assert levels == [("first", 0), ("first", 1), ("first", LAST_ALONE), ("second", LAST_ALONE), ("other", 0)]
        assert first.verdict is second.verdict is Verdict.CORRECT
        assert [f.check for f in second.findings] == ["gpu_memory"] and "from its first attempt" in second.findings[0].message
        assert not [f for f in other.findings if f.check == "gpu_memory"]
        # Alone from the start and out of memory still: failed, as a last attempt is.
        outcomes["third"] = [result("p", Verdict.RUNTIME_ERROR, (oom,))]
        assert evaluator.evaluate_one(Candidate("p", "triton", "", "third")).verdict is Verdict.RUNTIME_ERROR
        assert levels[-1] == ("third", LAST_ALONE)
        for number in range(ALONE_AFTER - 2):  # the rest of them
            outcomes[f"n{number}"] = [result("p", Verdict.CORRECT)]
            evaluator.evaluate_one(Candidate("p", "triton", "", f"n{number}"))
            assert levels[-1] == (f"n{number}", LAST_ALONE)
        outcomes["after"] = [result("p", Verdict.CORRECT)]
        evaluator.evaluate_one(Candidate("p", "triton", "", "after"))
        assert levels[-1] == ("after", 0)


def test_a_candidate_in_flight_when_another_of_its_problem_needed_the_gpu_to_itself_retries_there(tmp_path):
    """Written against the memo the version before kept: set only once a candidate's last
    attempt, alone, passed, and read only when a candidate started. In a sweep on an H100
    (forty-fifth session) ``38_L1Norm_``'s candidates were in flight by then: seven of the
    eight ran out of memory twice before their last attempt (15 of the run's 17 retries).
    A candidate whose first attempt runs out
    after another of its problem ran out with the GPU's memory to itself goes straight to
    the last attempt."""
    from kz_core.evaluate.evaluator import ALONE_AFTER, LAST_ALONE
    from kz_core.model import Candidate, EvalResult, Finding, Verdict

    oom = Finding("runtime_error", "OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB.")

    def result(verdict, findings=()):
        return EvalResult(problem="p", sample_id="s", backend="triton", verdict=verdict, findings=findings)

    with _one_problem_evaluator(tmp_path) as evaluator:
        levels: list[tuple[str, int]] = []
        outcomes = {"first": [result(Verdict.RUNTIME_ERROR, (oom,)), result(Verdict.RUNTIME_ERROR, (oom,)), result(Verdict.CORRECT)]}

        def fake(candidate, compile_only=False):
            levels.append((candidate.sample_id, evaluator._alone_level()))
            if candidate.sample_id == "second" and len(levels) == 1:
                # While the second's first attempt runs, the first candidate runs out twice.
                assert evaluator.evaluate_one(Candidate("p", "triton", "", "first")).verdict is Verdict.CORRECT
                return result(Verdict.RUNTIME_ERROR, (oom,))
            return outcomes[candidate.sample_id].pop(0)

        evaluator._evaluate = fake
        outcomes["second"] = [result(Verdict.CORRECT)]
        second = evaluator.evaluate_one(Candidate("p", "triton", "", "second"))
        assert levels == [("second", 0), ("first", 0), ("first", 1), ("first", LAST_ALONE), ("second", LAST_ALONE)]
        assert second.verdict is Verdict.CORRECT
        assert "another candidate of p ran out" in second.findings[-1].message
        assert evaluator._alone_problems["p"] == ALONE_AFTER - 1


def test_a_second_attempt_that_waited_while_another_of_its_problem_needed_the_gpu_to_itself_goes_there(tmp_path):
    """Written against the version before, which read the memo only when a first attempt
    ended. In a sweep on an H100 (forty-seventh session) six of ``38_L1Norm_``'s candidates
    ran out of memory at once and queued for their second attempt (the GPU's whole memory
    budget, one after another); the first of them ran out again and set the memo, yet each
    of the others still ran its second attempt, ran out and only then went to the last. A
    second attempt whose turn comes after the memo is set runs as the last does."""
    from kz_core.evaluate.evaluator import ALONE_AFTER, LAST_ALONE
    from kz_core.model import Candidate, EvalResult, Finding, Verdict

    oom = Finding("runtime_error", "OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB.")

    def result(verdict, findings=()):
        return EvalResult(problem="p", sample_id="s", backend="triton", verdict=verdict, findings=findings)

    with _one_problem_evaluator(tmp_path) as evaluator:
        levels: list[tuple[str, int]] = []
        outcomes = {
            "first": [result(Verdict.RUNTIME_ERROR, (oom,)), result(Verdict.RUNTIME_ERROR, (oom,)), result(Verdict.CORRECT)],
            "second": [result(Verdict.RUNTIME_ERROR, (oom,)), result(Verdict.CORRECT)],
        }

        def fake(candidate, compile_only=False):
            if candidate.sample_id == "second" and evaluator._alone_level() == 1:
                # While the second waits for its turn, the first runs out twice (another thread).
                other = threading.Thread(target=evaluator.evaluate_one, args=(Candidate("p", "triton", "", "first"),))
                other.start()
                other.join(60)
            if evaluator._alone_level():
                with evaluator._alone_turn():  # as a GPU's reservation takes it
                    levels.append((candidate.sample_id, evaluator._alone_level()))
            else:
                levels.append((candidate.sample_id, 0))
            return outcomes[candidate.sample_id].pop(0)

        evaluator._evaluate = fake
        second = evaluator.evaluate_one(Candidate("p", "triton", "", "second"))
        assert levels == [("second", 0), ("first", 0), ("first", 1), ("first", LAST_ALONE), ("second", LAST_ALONE)]
        assert second.verdict is Verdict.CORRECT
        assert [f.check for f in second.findings] == ["gpu_memory"]
        assert "while it waited for the GPU's memory another candidate of p ran out" in second.findings[0].message
        assert evaluator._alone_problems["p"] == ALONE_AFTER - 1


@pytest.mark.triton
def test_a_candidate_s_constants_are_let_go_once_its_executor_has_taken_them(example_problems, monkeypatch):
    """Written against the version before: the parent kept a recording's constants (the
    received reply's memory) until the candidate's evaluation ended, through its trials,
    its wait for the GPU and its timing. A sweep's large models (4-8 GiB of constants
    each, eight candidates at once) filled the parent's budget for replies, and the next
    large replies were received into files. Once the executor has taken the plans, the
    parent holds none of them."""
    import gc
    from pathlib import Path

    from kz_core.evaluate import Evaluator, wire
    from kz_core.evaluate.evaluator import Evaluator as EvaluatorClass
    from kz_core.model import Candidate, Verdict

    from .conftest import eval_config

    honest = (Path(__file__).parents[2] / "examples" / "candidates" / "triton" / "1_vector_add.py").read_text()
    # A 24 MiB buffer the kernel is given (and never reads): a constant of the plan, in a
    # reply larger than wire.SPILL_ABOVE, which the reply budget counts.
    padded = (
        honest.replace("    out_ptr,  # output", "    pad_ptr,  # a buffer given and never read\n    out_ptr,  # output")
        .replace("def add(a: torch.Tensor, b: torch.Tensor)", "def add(a: torch.Tensor, b: torch.Tensor, pad: torch.Tensor)")
        .replace("add_kernel[grid](a, b, out, n_elements", "add_kernel[grid](a, b, pad, out, n_elements")
        .replace("        super().__init__()\n", "        super().__init__()\n        self.register_buffer(\"pad\", torch.zeros(6 << 20))\n")
        .replace("return add(a, b)", "return add(a, b, self.pad)")
    )
    held_at_replay: list[int] = []
    replay = EvaluatorClass._replay_verified

    def watched(self, *args, **kwargs):
        gc.collect()
        held_at_replay.append(wire.REPLY_MEMORY.held)
        return replay(self, *args, **kwargs)

    monkeypatch.setattr(EvaluatorClass, "_replay_verified", watched)
    gc.collect()
    held_before = wire.REPLY_MEMORY.held
    with Evaluator(example_problems, eval_config("eval.timing=false", "eval.workers=1")) as evaluator:
        result = evaluator.evaluate([Candidate("1_vector_add", "triton", padded, "padded")])[0]
    assert result.verdict is Verdict.CORRECT, result.message
    assert len(held_at_replay) == 1 and held_at_replay[0] <= held_before  # (another test's replies may have gone since)
