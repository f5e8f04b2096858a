"""Timing mechanics that run anywhere: the graph replay plan, the CPU path of
``time_forward``, the stopping rule and the dispatch-mode op recorder (graph capture
itself is covered by ``pytest -m gpu``)."""

from __future__ import annotations

import time
import types

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kz_core.evaluate import timing
from kz_core.evaluate.timing import TimingSettings, plan_replay, time_forward


def test_a_pair_of_calls_long_enough_is_replayed_alone():
    assert plan_replay(pair_ms=2.0, set_bytes=1 << 20, settings=TimingSettings(replay_ms=0.5)) == 2


def test_short_calls_are_batched_each_on_its_own_copy_of_the_inputs():
    assert plan_replay(pair_ms=0.01, set_bytes=64 << 10, settings=TimingSettings(replay_ms=0.5, max_calls_per_replay=256)) == 100  # 0.5 ms / 0.01 ms a pair


def test_calls_stop_where_their_input_buffers_reach_the_budget():
    # Every call reads a buffer of its own (so that each can be given inputs never seen):
    # 64 MB input sets, 8 of them in 512 MB, a shorter replay than replay_ms asks.
    assert plan_replay(pair_ms=0.01, set_bytes=64 << 20, settings=TimingSettings(replay_ms=1.0, max_calls_per_replay=256)) == 8
    assert plan_replay(pair_ms=0.01, set_bytes=4 << 30, settings=TimingSettings(replay_ms=1.0)) == 2  # even one is over


@given(pair_ms=st.floats(0.0, 50.0), set_bytes=st.integers(0, 1 << 34), replay_ms=st.floats(0.01, 10.0), max_calls=st.integers(1, 2048))
def test_replay_plans_are_even_and_bounded(pair_ms, set_bytes, replay_ms, max_calls):
    calls = plan_replay(pair_ms, set_bytes, TimingSettings(replay_ms=replay_ms, max_calls_per_replay=max_calls))
    assert calls % 2 == 0 and 2 <= calls <= max(2, max_calls)
    assert calls == 2 or calls * set_bytes <= timing.INPUT_BYTES


def test_a_long_first_replay_decides_the_calls_per_replay_alone(monkeypatch):
    """A two-call graph whose first replay takes PAIR_DECIDED times replay_ms is replayed
    two calls at a time whatever later replays say: no more are run to measure it (on
    KernelBench level 1 they were a dozen calls of milliseconds each, in the GPU's
    exclusive hold). A shorter one is measured as before, the median of five more."""
    runs: list[int] = []
    times = iter([[2.5], [0.3, 0.2, 0.25, 0.9, 0.2]])

    def replays_ms(graph, flush, device, replays, poison=None):
        runs.append(replays)
        return next(times)

    monkeypatch.setattr(timing, "_replays_ms", replays_ms)
    settings = TimingSettings(replay_ms=1.0)
    assert timing._pair_ms(None, None, "cuda", settings) == (2.5, 2.5)
    assert runs == [1] and plan_replay(2.5, 1 << 20, settings) == 2
    times = iter([[1.5], [0.3, 0.2, 0.25, 0.9, 0.2]])
    pair_ms, warmed_ms = timing._pair_ms(None, None, "cuda", settings)
    assert runs == [1, 1, 5] and pair_ms == 0.25 and warmed_ms == pytest.approx(1.5 + 1.85)
    assert plan_replay(pair_ms, 1 << 20, settings) == 8  # the first replay, 1.5 ms, would have said 2


def test_a_warm_up_counts_the_replays_that_ran_just_before(monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    settings = TimingSettings(warmup_ms=25.0)
    ran: list[int] = []
    # Warmed for the whole warmup_ms already: only the minimum runs.
    assert timing._warm_up(ran.append, "cuda", settings, minimum=1, warmed_ms=30.0) == 1
    # Not warmed: steps run until warmup_ms has passed. Each step here takes 10 ms of a
    # clock of the test's own: a real sleep of 10 ms took 13 ms and more on a busy machine,
    # and two steps passed 25 ms.
    clock = [0.0]

    def step(index):
        clock[0] += 0.01

    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    assert timing._warm_up(step, "cuda", settings, minimum=1) >= 3


def test_on_a_cpu_time_forward_alternates_the_seeds_and_returns_an_output_per_seed():
    seen = []

    def make(seed):
        return [torch.full((4,), float(seed))]

    def forward(x):
        seen.append(float(x[0]))
        return x * 2

    timed = time_forward(forward, make, [3, 5], [7, 11], "cpu", TimingSettings(method="graph", min_trials=4, max_trials=4))
    assert timed.stats["clock"] == "cpu" and timed.stats["trials"] == 4 and timed.stats["calls_per_trial"] == 1
    assert set(seen) == {3.0, 5.0}  # decoys are for graph capture only
    assert {seed: float(out[0]) for seed, out in timed.outputs} == {3: 6.0, 5: 10.0}
    # Unseen inputs are for GPU timings (CPU times are never turned into speedups).
    timed = time_forward(forward, make, [3, 5], [7, 11], "cpu", TimingSettings(min_trials=4, max_trials=4), unseen=[13, 17])
    assert [seed for seed, _ in timed.outputs] == [3, 5] and "unseen_ms" not in timed.stats


def test_a_forward_that_draws_random_numbers_draws_in_each_timed_call_what_the_reference_drew():
    """The reference's call on a seed's inputs draws from the generators as drawing those
    inputs left them (KernelBench's ``35_LSTM`` draws its initial states in forward).
    Written against the version before, in which each timed call drew on from where the
    call before it had left them: the outputs differed from the reference's."""
    import random

    import numpy

    def make(seed):
        torch.manual_seed(seed)
        random.seed(seed)
        numpy.random.seed(seed)
        return [torch.randn(4)]

    def reference(seed):
        inputs = make(seed)
        return inputs[0] + torch.randn(4) + random.random() + float(numpy.random.rand())

    def forward(x):
        return x + torch.randn(4) + random.random() + float(numpy.random.rand())

    for trials in (1, 4):  # one: the first set's last call is the warm-up
        timed = time_forward(forward, make, [3, 5], [7, 11], "cpu", TimingSettings(min_trials=trials, max_trials=trials))
        assert len(timed.outputs) == 2
        for seed, output in timed.outputs:
            assert torch.equal(output, reference(seed)), (trials, seed)


def test_a_graph_that_fails_after_taking_the_timing_inputs_falls_back_on_them_drawn_again(monkeypatch):
    """Graph timing drops the timing inputs' own copies once they are in its buffers (a
    large problem's two sets are as large as its inputs twice over). A graph that fails
    after that (out of memory in the replays) is timed with events on the same seeds'
    inputs, drawn again: the list it dropped was empty, and the fallback divided by its
    length. The GPU's own parts are stood in for: graph capture needs ``pytest -m gpu``."""
    drawn, seen = [], []

    def make(seed):
        drawn.append(seed)
        return [torch.full((4,), float(seed))]

    def forward(x):
        seen.append(float(x[0]))
        return x * 2

    def graph_out_of_memory(forward, make_inputs, input_sets, *args):
        assert len(input_sets) == 2
        input_sets.clear()  # what _time_graph does once the inputs are in its buffers
        raise torch.OutOfMemoryError("CUDA out of memory")

    def events(call, device, settings, after=None):
        times = []
        for index in range(4):
            started = time.perf_counter()
            call(index)
            times.append((time.perf_counter() - started) * 1e3)
        return timing.summarize(times, timing.EVENTS_CLOCK)

    monkeypatch.setattr(timing, "_time_graph", graph_out_of_memory)
    monkeypatch.setattr(timing, "_release", lambda device: None)
    monkeypatch.setattr(timing, "time_calls", events)
    states = timing._generator_states
    monkeypatch.setattr(timing, "_generator_states", lambda device: states("cpu"))
    timed = time_forward(forward, make, [3, 5], [7, 11], "cuda", TimingSettings(method="graph"))
    assert drawn == [3, 5, 3, 5] and set(seen) == {3.0, 5.0}
    assert timed.stats["note"] == f"timed with CUDA events: {timing.GRAPH_OUT_OF_MEMORY}"
    assert {seed: float(out[0]) for seed, out in timed.outputs} == {3: 6.0, 5: 10.0}


def test_a_forward_that_returns_a_buffer_it_keeps_gets_each_seeds_own_output():
    """Written against the version before: the last output of each input set was the same
    buffer, holding the last call's value, so an honest kernel that keeps its output
    buffer (allocated once) read as state drift for the other seed."""
    buffer = torch.empty(4)

    def make(seed):
        return [torch.full((4,), float(seed))]

    def forward(x):
        return buffer.copy_(x * 2)

    timed = time_forward(forward, make, [3, 5], [7, 11], "cpu", TimingSettings(method="graph", min_trials=4, max_trials=4))
    assert {seed: float(out[0]) for seed, out in timed.outputs} == {3: 6.0, 5: 10.0}
    assert all(out.data_ptr() != buffer.data_ptr() for _, out in timed.outputs)


def test_outputs_apart_from_kept_tensors_are_returned_as_they_are():
    from kz_core.evaluate.execution import apart_from

    kept, fresh = torch.ones(3), torch.zeros(3)
    same, other, text = apart_from([kept[1:], fresh, "x"], [kept])
    assert same.data_ptr() != kept[1:].data_ptr() and torch.equal(same, kept[1:])  # a view into a kept tensor is copied
    assert other is fresh and text == "x"


def test_timing_stops_at_the_budget_or_once_stable():
    settings = TimingSettings(min_trials=10, max_trials=1000, budget_ms=100.0, target_relative_iqr=0.01)
    assert not timing._done([1.0] * 9, 9.0, settings)
    assert timing._done([1.0] * 20, 20.0, settings)  # stable: IQR 0
    noisy = [1.0, 2.0] * 10
    assert not timing._done(noisy, 30.0, settings)
    assert timing._done(noisy, 100.0, settings)
    assert timing._done([1.0, 2.0] * 500, 1.0, settings)  # max_trials


def test_the_op_recorder_names_the_aten_ops_called_under_it():
    names: list[str] = []
    x = torch.randn(4, 4)
    with timing._op_recorder(names):
        torch.softmax(x @ x, dim=-1)
    assert "aten::mm" in names and "aten::_softmax" in names


def test_inputs_that_differ_in_shape_or_value_do_not_share_a_graph():
    a = [torch.zeros(2, 3), 4]
    assert timing._signature(a) == timing._signature([torch.ones(2, 3), 4])
    assert timing._signature(a) != timing._signature([torch.zeros(3, 2), 4])
    assert timing._signature(a) != timing._signature([torch.zeros(2, 3), 5])
    assert timing._signature(a) != timing._signature([torch.zeros(2, 3).t().contiguous().t(), 4])


def test_outputs_of_the_same_inputs_agree_within_their_dtypes_tolerance():
    from kz_core.evaluate.correctness import Agreement

    agree = Agreement()
    first = torch.randn(64)
    assert agree(first, first.clone()) == ""
    assert agree(first, first * (1 + 1e-6)) == ""  # atomics may round differently every call
    assert "mismatch" in agree(first, torch.zeros(64)) or "outside" in agree(first, torch.zeros(64))
    assert agree((first, 3), (first.clone(), 3)) == ""
    assert "tuple[2]" in agree((first, 3), [first])
    assert agree((first, 3), (first.clone(), 4)) != ""
    assert agree(first.to(torch.int32), first.to(torch.int32) + 1) != ""  # integers exactly
    nan = torch.tensor([float("nan"), 1.0])
    assert agree(nan, nan.clone()) == ""
    assert Agreement(atol=1.0, rtol=0.0)(first, first + 0.5) == ""


def test_graph_calls_are_bounded_by_the_bytes_of_outputs_kept():
    assert timing._within_kept_bytes(512, 1 << 10) == 512
    assert timing._within_kept_bytes(512, 64 << 20) == 16  # 64 MB outputs: 16 fit in 1 GiB
    assert timing._within_kept_bytes(400, 100 << 20) == 10
    assert timing._within_kept_bytes(40, 4 << 30) == 2  # even one is more than the budget


@given(calls=st.integers(1, 1024), output_bytes=st.integers(0, 1 << 34))
def test_bounded_replay_plans_stay_even(calls, output_bytes):
    kept = timing._within_kept_bytes(2 * calls, output_bytes)
    assert kept % 2 == 0 and 2 <= kept <= 2 * calls
    assert kept == 2 or kept * output_bytes <= timing.KEPT_BYTES


def test_many_pairs_are_screened_at_once_and_the_first_disagreement_named():
    from kz_core.evaluate.correctness import Agreement

    agree = Agreement()
    first = torch.randn(32)
    pairs = [(first, first.clone()), (first, first * (1 + 1e-6)), ((first, 1), (first, 1)), (first, first.clone())]
    assert agree.first_disagreement(pairs) == (-1, "")
    assert agree.first_disagreement([]) == (-1, "")
    wrong = first.clone()
    wrong[7] += 1.0
    index, why = agree.first_disagreement([*pairs, (first, wrong), (first, torch.zeros(32))])
    assert index == 4 and why
    assert agree.first_disagreement([(first, first[:16])])[0] == 0  # another shape
    assert agree.first_disagreement([((first, 1), (first, 2))])[0] == 0
    ints = torch.arange(6)
    assert agree.first_disagreement([(ints, ints.clone()), (ints, ints + 1)])[0] == 1
    nan = torch.tensor([float("nan"), 2.0])
    assert agree.first_disagreement([(nan, nan.clone()), (nan, torch.tensor([2.0, 2.0]))])[0] == 1


def test_poison_overwrites_outputs_but_never_inputs():
    x = torch.randn(8)
    outputs = [torch.randn(4), torch.arange(4, dtype=torch.int16), torch.ones(3, dtype=torch.bool), x[2:5]]
    timing._poison(outputs, secret=(1 << 20) + 5, spare=[[x]])
    assert torch.isnan(outputs[0]).all()
    assert (outputs[1] == ((1 << 20) + 5) % (1 << 15)).all()
    assert (outputs[2] == torch.ones(3, dtype=torch.bool)).all()  # the secret's lowest bit
    assert not torch.isnan(x).any()  # a view of an input is spared


def test_a_timing_reports_the_host_seconds_of_its_parts():
    """``Timed.phases``: where a timing's time went (diagnostics the evaluator records per
    request kind), here the CPU's two parts: the inputs drawn, then the timed calls."""
    drawn: list[int] = []
    calls: list[float] = []

    def make(seed):
        drawn.append(seed)
        return [torch.full((4,), float(seed))]

    def forward(x):
        calls.append(float(x[0]))
        return x * 2

    timed = time_forward(forward, make, [3, 5], [7, 11], "cpu", TimingSettings(method="graph", min_trials=4, max_trials=4))
    assert drawn == [3, 5] and set(calls) == {3.0, 5.0} and timed.stats["trials"] == 4
    assert {seed: float(out[0]) for seed, out in timed.outputs} == {3: 6.0, 5: 10.0}
    assert set(timed.phases) == {"inputs", "timed calls"} and all(seconds >= 0 for seconds in timed.phases.values())
