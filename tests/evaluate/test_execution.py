"""Worker-side mechanics that can be checked without a worker: fingerprints, flags, ops."""

from __future__ import annotations

import pytest
import torch

from kz_core.evaluate import execution

from .conftest import LINEAR_PROBLEM


def test_fingerprints_tell_inputs_apart():
    x = torch.randn(1000)
    y = x.clone()
    y[500] = torch.nextafter(y[500], torch.tensor(float("inf")))
    swapped = x.clone()
    swapped[[1, 2]] = swapped[[2, 1]]
    prints = execution.fingerprint([x, x.clone(), y, swapped, x.reshape(10, 100), 3])
    assert prints[0] == prints[1]
    assert len({prints[0], prints[2], prints[3], prints[4]}) == 4
    assert prints[5] == execution.fingerprint([3])[0]


def test_device_sums_detect_single_bit_changes_and_swaps(monkeypatch):
    monkeypatch.setattr(execution, "_FINGERPRINT_CHUNK", 7)  # several chunks
    # Fixed bytes, the swapped ones distinct (random ones were equal one time in 256).
    raw = (torch.arange(1003) * 37 % 251).to(torch.uint8)
    base = execution.device_sums(raw)
    assert base == execution.device_sums(raw.clone())
    flipped = raw.clone()
    flipped[999] ^= 1
    swapped = raw.clone()
    swapped[[0, 4]] = raw[[4, 0]]
    swapped_words = raw.clone()
    swapped_words[0:4], swapped_words[4:8] = raw[4:8].clone(), raw[0:4].clone()
    tail = raw.clone()
    tail[1002] ^= 1
    sums = {execution.device_sums(t) for t in (flipped, swapped, swapped_words, tail)}
    assert base not in sums and len(sums) == 4


def test_compute_ops_ignore_data_movement():
    names = ["aten::empty", "aten::copy_", "aten::view", "aten::mm", "aten::add", "aten::mm", "cudaLaunchKernel"]
    assert execution.torch_compute_ops(names) == ["aten::mm", "aten::add"]


def test_views_and_moves_in_every_spelling_are_not_compute():
    """What the profiler and the dispatcher name for views (properties, composites,
    in-place forms) and moves that honest wrappers use: none counts as torch computing."""
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile
    from torch.utils._python_dispatch import TorchDispatchMode

    x = torch.randn(2, 3, 4, 5)
    pairs = torch.randn(4, 2)
    spellings = [
        lambda: x.T, lambda: x.mT, lambda: x.swapaxes(1, 2), lambda: x.swapdims(1, 2), lambda: x.moveaxis(1, 2),
        lambda: x.ravel(), lambda: x.unfold(2, 2, 1), lambda: x.diagonal(), lambda: x.reshape_as(x),
        lambda: torch.view_as_real(torch.view_as_complex(pairs)), lambda: x.clone().unsqueeze_(0),
        lambda: x.clone().unsqueeze(0).squeeze_(0), lambda: x[0, 0].clone().t_(), lambda: x.clone().transpose_(0, 1),
        lambda: x.clone().swapaxes_(0, 1), lambda: torch.empty(0).resize_as_(x), lambda: F.unfold(x, 2),
        lambda: x.tensor_split(2, dim=1), lambda: torch.atleast_3d(x), lambda: torch.cat([x, x]),
        lambda: torch.diag(x[0, 0, 0]), lambda: torch.diag_embed(x[0, 0]), lambda: torch.diagflat(x[0, 0, 0]),
    ]

    class Names(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(f"aten::{func._schema.name.split('::')[1]}")
            return func(*args, **(kwargs or {}))

    for spelling in spellings:
        seen: list[str] = []
        with profile(activities=[ProfilerActivity.CPU]) as trace, Names():
            spelling()
        assert execution.torch_compute_ops([event.name for event in trace.events()] + seen) == []


def test_flags_are_restored():
    before = execution.global_flags()
    torch.set_float32_matmul_precision("medium")
    changed = execution.global_flags()
    assert changed != before
    execution.restore_flags(before)
    assert execution.global_flags() == before


def test_storage_overlap():
    base = torch.zeros(10)
    assert execution.storages_overlap(base[2:5], base)
    assert not execution.storages_overlap(torch.zeros(3), base)


def test_profiled_blocks_nest_the_outer_sees_everything(tmp_path):
    # torch runs one profiler at a time: a nested torch.profiler.profile() would leave the
    # outer one empty, hiding compute from the torch_compute_in_forward guard.
    x = torch.randn(8, 8)
    with execution.profiled("cpu", tmp_path / "outer.json") as outer:
        torch.mm(x, x)
        with execution.profiled("cpu", tmp_path / "inner.json") as inner:
            torch.add(x, x)
        torch.sub(x, x)
    assert "aten::add" in inner.op_names
    assert "aten::mm" not in inner.op_names and "aten::sub" not in inner.op_names
    assert {"aten::mm", "aten::add", "aten::sub"} <= set(outer.op_names)
    assert not execution._open_recordings and not execution._session
    with execution.profiled("cpu", tmp_path / "again.json") as again:  # nothing left running
        torch.mul(x, x)
    assert "aten::mul" in again.op_names and "aten::add" not in again.op_names


def test_profiled_closes_when_the_body_raises(tmp_path):
    try:
        with execution.profiled("cpu", tmp_path / "t.json"):
            raise ValueError("boom")
    except ValueError:
        pass
    assert not execution._open_recordings and not execution._session


def test_a_wrapper_of_the_current_stream_is_not_a_created_stream(monkeypatch):
    # torch.cuda.current_stream() builds a Stream wrapper on every call (the kz CUDA API
    # launches through it): only a stream other than the current one counts as created.
    import types

    import torch

    from kz_core.evaluate.execution import is_current_stream

    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda index: 1234 if index == 0 else 99, raising=False)
    assert is_current_stream(types.SimpleNamespace(cuda_stream=1234, device_index=0))
    assert not is_current_stream(types.SimpleNamespace(cuda_stream=5678, device_index=0))  # a new stream
    assert not is_current_stream(types.SimpleNamespace(cuda_stream=1234, device_index=1))  # another device's
    assert not is_current_stream(object())  # not a stream at all: counted, to be safe


def test_profiling_and_restoring_flags_do_not_import_dynamo(tmp_path):
    """torch.profiler's start asks hasattr(torch, "_inductor"), and use_deterministic_algorithms
    imports torch._inductor: each imports Inductor and Dynamo (2.4-4 s of CPU) in every fresh
    worker that profiles a call or puts the torch flags back (module validation took 1.4 s a
    module on two cores, almost all of it that import). In a fresh interpreter: neither
    imports them now, a flag a call changed is still put back, and once Inductor is imported
    torch's own check runs as before."""
    import subprocess
    import sys

    script = """
import sys, torch
from pathlib import Path
from kz_core.evaluate.execution import global_flags, profiled, restore_flags
flags = global_flags()
with profiled('cpu', Path(sys.argv[1])) as profile:
    torch.ones(4).relu()
restore_flags(flags)
print('plain', 'torch._dynamo' in sys.modules, 'torch._inductor' in sys.modules, 'aten::relu' in profile.op_names, '_inductor' in torch._lazy_modules)
torch.use_deterministic_algorithms(True, warn_only=True)
restore_flags(flags)
print('restored', torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
with profiled('cpu', Path(sys.argv[1])) as profile:
    torch.ones(4).sin()
print('after', 'torch._inductor' in sys.modules, 'aten::sin' in profile.op_names)
"""
    completed = subprocess.run([sys.executable, "-c", script, str(tmp_path / "trace.json")], capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-2000:]
    plain, restored, after = completed.stdout.splitlines()[-3:]
    assert plain == "plain False False True True", plain
    assert restored == "restored False False", restored
    assert after == "after True True", after  # the flags' import happened: torch's own check, unchanged


def test_a_recording_does_not_import_dynamo_and_a_compiled_forward_is_still_recorded():
    """torch wraps a dispatch mode's __torch_dispatch__ to keep Dynamo out of it, importing
    torch._dynamo (2.4 s here) on its first op; kz's recorder skips that while nothing has
    imported Dynamo, and once a forward compiles, Dynamo is kept out as before. In a fresh
    interpreter: the test's own process has imported Dynamo long ago."""
    import subprocess
    import sys

    script = """
import sys, torch
from kz_core.evaluate.recording import Recorder
x = torch.ones(4)
recorder = Recorder([x], 1 << 20)
recorder.call(lambda a: (a * 2).relu(), [x])
print('plain', 'torch._dynamo' in sys.modules, [s['op'][1] for s in recorder.steps if s['kind'] == 'op'])
compiled = torch.compile(lambda a: (a * 3).sin(), backend='eager')
recorder = Recorder([x], 1 << 20)
out = recorder.call(compiled, [x])
print('compiled', 'torch._dynamo' in sys.modules, [s['op'][1] for s in recorder.steps if s['kind'] == 'op'], bool(torch.allclose(out, (x * 3).sin())))
"""
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-2000:]
    plain, compiled = completed.stdout.splitlines()[-2:]
    assert plain == "plain False ['mul', 'relu']", plain
    assert compiled == "compiled True ['mul', 'sin'] True", compiled


class _Opened(Exception):
    """Raised by the fake ``_new_shared_cuda`` once it has what it was given."""


def test_a_shared_tensor_is_opened_by_its_memory_handle_alone(monkeypatch):
    """The receiver of a CUDA IPC description (a reference worker comparing a candidate's
    outputs) hands torch only the memory handle: never the reference count's file and
    offset the sender named (torch's receiver decrements the count there when it lets
    the memory go: a write at an offset a candidate chooses, in the trusted process) and
    never the sender's IPC event (it lives in the sender's /dev/shm, private now). The
    version before passed all three through."""
    given = []

    def fake_new_shared_cuda(*args):
        given.append(args)
        raise _Opened

    monkeypatch.setattr(torch.UntypedStorage, "_new_shared_cuda", staticmethod(fake_new_shared_cuda))
    description = {
        "device": 0, "handle": b"h" * 64, "storage_size": 4096, "storage_offset_bytes": 0,
        "ref_counter_handle": b"/torch_1_planted", "ref_counter_offset": 1 << 40, "event_handle": b"e" * 64,
        "event_sync_required": True, "dtype": "float32", "offset": 0, "shape": [1024], "stride": [1],
    }
    for _ in range(2):
        try:
            execution.open_shared_cuda_tensor(description)
        except _Opened:
            pass
    (first, second) = given
    device, handle, size, offset, counter, counter_offset, event, sync = first
    assert (device, handle, size, offset) == (0, b"h" * 64, 4096, 0)
    assert counter != b"/torch_1_planted" and counter.startswith(b"/kz-uncounted-") and counter_offset == 0
    assert second[4] != counter  # a fresh name each time: nothing to plant in advance
    assert event == b"" and sync is False


def test_the_sender_gives_back_the_counts_of_what_it_shared(monkeypatch):
    """A sender synchronises before sharing (the receiver waits on no event of its) and
    keeps each shared tensor's count until :func:`execution.release_shared_counters`,
    which gives each back once."""
    synced, released = [], []

    class Storage:
        def __init__(self, n):
            self.n = n

        def _share_cuda_(self):
            return (0, b"h", 16, 0, f"/torch_{self.n}".encode(), self.n, b"e", True)

    class Shared:
        dtype = torch.float32
        shape = (4,)

        def __init__(self, n):
            self.storage = Storage(n)
            self.device = "cuda:0"

        def untyped_storage(self):
            return self.storage

        def storage_offset(self):
            return 0

        def stride(self):
            return (1,)

    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: synced.append(device))
    monkeypatch.setattr(torch.UntypedStorage, "_release_ipc_counter_cuda", staticmethod(lambda handle, offset: released.append((handle, offset))), raising=False)
    monkeypatch.setattr(execution, "_shared_counters", [])
    entries = [execution.share_cuda_tensor(Shared(n)) for n in (3, 5)]
    assert synced == ["cuda:0", "cuda:0"]
    assert not {"ref_counter_handle", "ref_counter_offset", "event_handle", "event_sync_required"} & set(entries[0])  # kept here
    assert released == []
    assert execution.release_shared_counters() == 2
    assert sorted(released) == [(b"/torch_3", 3), (b"/torch_5", 5)]
    assert execution.release_shared_counters() == 0 and len(released) == 2


def test_a_shared_storage_said_to_reach_past_its_allocation_is_refused(monkeypatch):
    """A candidate's process (a backend without trusted kernels) names its storage's size;
    one that reaches past the allocation the handle maps (as the driver reports it) is
    refused before anything reads it, rather than faulting the reference worker's CUDA
    context. An executor's (``copy=False``) is not asked about."""

    class Storage:
        def data_ptr(self):
            return 1 << 20

    monkeypatch.setattr(torch.UntypedStorage, "_new_shared_cuda", staticmethod(lambda *args: Storage()))
    description = {
        "device": 0, "handle": b"h" * 64, "storage_size": 4096, "storage_offset_bytes": 0,
        "dtype": "float32", "offset": 0, "shape": [1024], "stride": [1],
    }
    asked = []

    def mapped(pointer):
        asked.append(pointer)
        return (1 << 20, 1024)  # the handle maps 1 KiB: the storage says 4 KiB

    monkeypatch.setattr(execution, "allocation_range", mapped)
    with pytest.raises(ValueError, match="beyond the sender's allocation"):
        execution.open_shared_cuda_tensor(description)
    assert asked == [1 << 20]
    monkeypatch.setattr(execution, "allocation_range", lambda pointer: (1 << 20, 4096))
    with pytest.raises(Exception) as caught:  # past the check, on to the device this machine lacks
        execution.open_shared_cuda_tensor(description)
    assert "beyond the sender's allocation" not in str(caught.value)
    with pytest.raises(ValueError, match="malformed"):
        execution.open_shared_cuda_tensor({**description, "storage_size": -1})


def test_a_problem_s_models_are_built_on_the_gpu_from_its_reference_s_size_alike_in_every_worker():
    """eval.device_init_mb: a reference Model of at least that many bytes (on torch's meta
    device) has the problem's models built with the GPU as torch's default device; the
    choice comes from the problem alone, so every worker makes it alike. A CPU never does;
    a Model that cannot be built on the meta device stays on the CPU."""
    from kz_core.evaluate.worker import Worker

    def worker(device: str, limit: int, code: str = LINEAR_PROBLEM) -> Worker:
        made = Worker.__new__(Worker)
        made.device, made.device_init_bytes, made.device_inits = device, limit, {}
        made.baseline_flags = execution.global_flags()
        module = type(torch)("problem")
        exec(code, module.__dict__)  # noqa: S102 - the test's own problem
        made.problem_module = lambda problem: module
        return made

    problem = {"hash": "h", "name": "linear", "code": LINEAR_PROBLEM}
    weights = (1024 * 1024 + 1024) * 4
    assert worker("cuda:0", weights).builds_on_device(problem, 1)
    assert not worker("cuda:0", weights + 1).builds_on_device(problem, 1)
    assert not worker("cuda:0", 0).builds_on_device(problem, 1)
    assert not worker("cpu", 1).builds_on_device(problem, 1)
    needs_data = LINEAR_PROBLEM.replace("self.linear = nn.Linear(features, features)", "self.linear = nn.Linear(features, int(torch.ones(1).sum().item()))")
    assert not worker("cuda:0", 1, needs_data).builds_on_device(problem, 1)


def test_a_model_built_on_the_device_draws_its_weights_there_and_says_so_when_it_cannot():
    """instantiate(..., on_device=True) builds under torch's default device (the meta device
    stands in for a GPU here): the model's tensors are made there, and a module that cannot
    be built so raises an error naming eval.device_init_mb."""
    module = type(torch)("problem")
    exec(LINEAR_PROBLEM, module.__dict__)  # noqa: S102 - the test's own problem
    model = execution.instantiate(module.Model, [16], 3, "meta", on_device=True)
    assert model.linear.weight.device.type == "meta"

    class NeedsHost(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.table = torch.nn.Parameter(torch.from_numpy(torch.arange(4.0).numpy() + torch.ones(4).numpy()))

    with pytest.raises(RuntimeError, match="eval.device_init_mb"):
        execution.instantiate(NeedsHost, [], 3, "meta", on_device=True)
    assert execution.instantiate(NeedsHost, [], 3, "cpu").table.device.type == "cpu"
