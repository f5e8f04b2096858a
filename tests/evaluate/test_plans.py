"""Recording and replaying plans hold no more memory than the forward itself did."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from kz_core.evaluate.plans import Replay, release_schedule
from kz_core.evaluate.recording import Recorder, record_kernel


def _forward(seen: list):
    """x*2 -> kernel k1 on it -> +1 -> kernel k2 on that -> *3: the first intermediate's
    last use is the addition."""

    def forward(x):
        a = x * 2
        seen.append(weakref.ref(a))
        with record_kernel("fake", {"name": "k1"}, [1], [a], {}):
            pass
        b = a + 1
        del a
        seen.append(seen[0]() is None)  # freed while the call goes on?
        with record_kernel("fake", {"name": "k2"}, [1], [b], {}):
            pass
        return b * 3

    return forward


def test_a_recording_keeps_no_value_of_the_forward_alive():
    x = torch.randn(64, 64)
    seen: list = []
    recorder = Recorder([x], 1 << 20)
    output = recorder.call(_forward(seen), [x])
    plan = recorder.plan(output)
    assert seen[1] is True, "the recorder kept an intermediate the forward had dropped"
    assert [s["kind"] for s in plan["steps"]] == ["op", "kernel", "op", "kernel", "op"]
    assert plan["outputs"] == {"t": ["val", 2]}


def test_a_replay_drops_each_value_after_its_last_use_and_gives_the_same_outputs():
    x = torch.randn(64, 64)
    recorder = Recorder([x], 1 << 20)
    plan = recorder.plan(recorder.call(_forward([]), [x]))
    assert release_schedule(plan) == [[], [], [0], [], [1]]  # a after b = a + 1, b after b * 3
    launched: dict[str, weakref.ref] = {}
    dead_at_k2: list[bool] = []

    def launch(step, args, options):
        if step["kernel"]["name"] == "k2":
            gc.collect()
            dead_at_k2.append(launched["k1"]() is None)
        launched[step["kernel"]["name"]] = weakref.ref(args[0])

    replay = Replay(plan, [], launch, "cpu")
    fresh = torch.randn(64, 64)
    provenance: dict = {}
    result = replay(fresh, provenance=provenance)
    assert dead_at_k2 == [True], "the replay kept a value after its last use"
    torch.testing.assert_close(result, (fresh * 2 + 1) * 3, rtol=0, atol=0)
    assert provenance["kernel_derived"] == [True]  # the kernel wrote b, and b * 3 reads it


def test_an_address_freed_during_the_call_names_the_tensor_that_has_it_now():
    """A view made outside torch's dispatcher (as a kernel launcher's pointer arithmetic
    does) of a tensor that took a freed tensor's memory is an alias of the new tensor."""
    x = torch.randn(1024)
    recorder = Recorder([x], 1 << 20)
    with recorder:
        pass
    reused = False
    for _ in range(20):
        recorder.call(lambda x: x * 2, [x])  # a value of 4 KiB, freed at once
        old_key = recorder.steps[-1]["out"]
        before = {key for key, held in recorder._storages.items() if not held.alive()}
        fresh = recorder.call(lambda x: x + 1, [x])  # malloc often hands the same block back
        address = ("cpu", fresh.untyped_storage().data_ptr())
        if address in before:
            reused = True
            break
    if not reused:
        pytest.skip("the allocator never handed a freed block back here")
    with recorder.suspend():
        view = fresh.as_strided((512,), (2,), 0)
    assert old_key != recorder.steps[-1]["out"]
    ref = recorder.ref(view)
    alias = recorder.steps[-1]
    assert alias["op"] == ["aten", "as_strided", "default"]
    assert alias["args"][0] == recorder.steps[-2]["out"], "the view was taken for the freed tensor's"
    assert ref == alias["out"]


def test_a_recordings_gap_calls_stop_at_their_budget():
    """Written against the version before, which made every one of the secret number of
    calls between a recording and the next (up to 31: 11 s of the GPU for one level-1
    candidate on the H200). With a budget, no call starts once it has passed (each call
    here takes at least 20 ms, so at most three fit 50 ms, however loaded the machine);
    without one, all are made."""
    import time as clock

    from kz_core.evaluate.candidate_ops import gap_calls

    calls = []

    def slow() -> None:
        calls.append(1)
        clock.sleep(0.02)

    made = gap_calls(slow, 31, 0.05)
    assert 1 <= made <= 3 and made == len(calls)
    calls.clear()
    assert gap_calls(slow, 5, 0.0) == 5 == len(calls)
    assert gap_calls(slow, 0, 0.05) == 0


@pytest.mark.parametrize("api", ["profiler", "autograd"])
def test_a_profiler_range_in_the_forward_is_run_not_recorded(api):
    """Instrumented kernels name their launches for the profiler
    (``torch.profiler.record_function``); the range computes nothing. The version before
    refused the forward as not replayable (the operator profiler._record_function_enter_new
    is not aten), so such an honest candidate was a ``runtime_error``; now the range runs
    while it is recorded and the plan holds only the work, which replays alike."""
    ranges = torch.profiler.record_function if api == "profiler" else torch.autograd.profiler.record_function

    def forward(x):
        with ranges("instrumented"):
            a = x * 2
            with record_kernel("fake", {"name": "k"}, [1], [a], {}):
                pass
        return a + 1

    x = torch.randn(8, 8)
    recorder = Recorder([x], 1 << 20)
    plan = recorder.plan(recorder.call(forward, [x]))
    assert [step.get("op", step.get("kernel", {}).get("name")) for step in plan["steps"]] == [["aten", "mul", "Tensor"], "k", ["aten", "add", "Tensor"]]
    fresh = torch.randn(8, 8)
    replay = Replay(plan, [], lambda step, args, options: None, "cpu")
    torch.testing.assert_close(replay(fresh, provenance={}), fresh * 2 + 1, rtol=0, atol=0)
