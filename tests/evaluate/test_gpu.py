"""The evaluator on a GPU (``pytest -m gpu`` on a CUDA machine; skipped elsewhere).

Honest examples are correct, their recorded plans replayed by the executor and timed as
CUDA graph replays, compared with eager and torch.compile baselines timed the same way;
every cheat in the suite is caught on the GPU too, including those that only matter there
(side streams, graph capture), and memory left unwritten reads back NaN.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kz_core.evaluate.references import PROBLEM_ALLOCATED_BYTES
from kz_core.model import Candidate, Severity, Verdict

from .conftest import LINEAR_PROBLEM, cheat_candidate, cheat_header, cheat_id, cheat_paths, example_candidates, gpu_cheat_params, wrong_output_family

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu_examples(gpu_evaluator):
    return gpu_evaluator.evaluate(example_candidates("triton") + example_candidates("cuda"))


def test_gpu_examples_are_correct_timed_and_compared_with_baselines(gpu_examples):
    assert {r.backend for r in gpu_examples} == {"triton", "cuda"}
    for result in gpu_examples:
        assert result.verdict is Verdict.CORRECT, f"{result.problem}: {result.message}"
        assert result.runtime is not None and result.runtime.clock == "cuda_graph", result.runtime
        assert result.runtime.trials >= 10 and result.runtime.calls_per_trial >= 2
        assert set(result.baselines) == {"eager", "compile"}, result.findings
        assert {b.clock for b in result.baselines.values()} == {"cuda_graph"}, result.baselines
        assert set(result.speedups) == {"eager", "compile"}
        assert result.environment.device_name and result.environment.device.startswith("cuda")


def test_gpu_the_compile_baseline_is_compiled_ahead_once_per_problem(gpu_examples, gpu_evaluator):
    """Each problem's reference worker compiled its ``compile`` baseline once, on fake
    tensors with no GPU lock and then with the GPU shared, before the first candidate's
    exclusive hold timed it (``compile_ahead``)."""
    requests = gpu_evaluator.contention.requests()
    problems = len({r.problem for r in gpu_examples})
    assert requests.get("reference compile_baseline_fake", {}).get("count") == problems, requests
    assert requests.get("reference compile_baseline", {}).get("count") == problems, requests


def test_gpu_a_compile_baseline_compiled_on_fake_tensors_allocates_nothing_and_its_first_real_call_loads_it(gpu_evaluator):
    """On the GPU, ``op_compile_baseline_fake`` makes no real tensor of the problem's (none
    is computed; torch makes a few small ones of its own while compiling) and the first
    real call in the same worker finds the graph in inductor's cache."""
    from kz_core.evaluate.calls import call_worker, problem_payload
    from kz_core.model import Problem

    service = gpu_evaluator.references
    problem = Problem("gpu_fake_compile", LINEAR_PROBLEM)
    request = {"op": "compile_baseline_fake", "problem": problem_payload(problem), "init_seed": 3, "seed": 4}
    with service.worker(problem) as worker:
        reply, failure = call_worker(worker, request, 600, "compile baseline on fake tensors")
        pid = worker.worker_pid
    # torch's own allocations (49 small ones on an H100, one of them while the model was
    # built): no tensor of the problem's, whose weight alone is 4 MiB.
    assert failure is None and reply["problem_allocated_bytes"] < PROBLEM_ALLOCATED_BYTES and reply["allocated_bytes"] < 64 << 20, (reply, failure)
    with gpu_evaluator._gpu.shared(), service.worker(problem, prefer=pid) as worker:
        assert worker.worker_pid == pid
        reply, failure = call_worker(worker, {**request, "op": "compile_baseline"}, 600, "compile baseline")
    assert failure is None and reply["graph_cache_hits"] >= 1, (reply, failure)


@pytest.mark.parametrize("path", gpu_cheat_params(cheat_paths()), ids=cheat_id)
def test_gpu_every_cheat_is_caught(path, gpu_evaluator):
    header = cheat_header(path)
    result = gpu_evaluator.evaluate([cheat_candidate(path)])[0]
    assert result.verdict is not Verdict.CORRECT, f"{path.stem} fooled the GPU evaluator"
    assert result.verdict.value in header["expect"].split("|"), result.message
    errors = [f.check for f in result.findings if f.severity is Severity.ERROR]
    expected = wrong_output_family(header["check"])
    assert expected & set(errors), f"expected {header['check']}, got {errors}: {result.message}"


def test_gpu_unwritten_output_memory_reads_as_poison(gpu_evaluator):
    path = next(p for p in cheat_paths() if cheat_id(p) == "triton/uninit_tail")
    result = gpu_evaluator.evaluate([Candidate("1_vector_add", "triton", path.read_text(), "uninit")])[0]
    assert result.verdict is Verdict.INCORRECT
    assert "non_finite" in [f.check for f in result.findings], result.message


def test_gpu_poison_fills_freed_blocks_where_they_lie():
    """Written against the version before, which gave the allocator's whole cache back to
    the driver before every trial (0.17 s a trial on an H200 for level 1, with the GPU
    shared): every freed block now reads back NaN in place, in every floating dtype, and
    the allocator keeps the memory it had."""
    import torch

    from kz_core.evaluate.execution import free_blocks, poison_free_memory

    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")
    dtypes = (torch.float32, torch.float16, torch.bfloat16)
    answers = [torch.full((1 << 22,), 3.0, device="cuda", dtype=dtype) for dtype in dtypes]
    small = torch.full((1000,), 5.0, device="cuda")
    del answers, small
    torch.cuda.synchronize()
    reserved = torch.cuda.memory_reserved()
    assert free_blocks("cuda"), "the allocator's snapshot named no free block"
    poison_free_memory("cuda", 1)
    torch.cuda.synchronize()
    assert torch.cuda.memory_reserved() >= reserved, "the cache was given back"
    # The same sizes in the same order take the freed blocks (nothing allocated between).
    again = [torch.empty(1 << 22, device="cuda", dtype=dtype) for dtype in dtypes]
    small = torch.empty(1000, device="cuda")
    for tensor in [*again, again[0].view(torch.float64), small]:
        assert torch.isnan(tensor).all(), tensor.dtype


@pytest.fixture(scope="module")
def ipc_evaluator(example_problems):
    """Every output compared on the GPU by a reference worker (CUDA IPC), as for outputs
    too large to move."""
    import torch

    from kz_core.config import load_config
    from kz_core.evaluate import Evaluator

    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")
    config = load_config(None, ["eval.device=cuda", "eval.workers=2", "eval.cache=false", "eval.transfer_limit_mb=0", "eval.baselines=[eager]"]).eval
    with Evaluator(example_problems, config) as evaluator:
        yield evaluator


def test_gpu_outputs_compared_on_the_device(ipc_evaluator):
    """Through CUDA IPC between sandboxed workers that each have a /dev/shm of their own
    (where the kernel allows it): the receiver opens the memory handle alone, the sender
    gives its reference counts back (execution.open_shared_cuda_tensor)."""
    from kz_core.evaluate.isolation import support

    results = ipc_evaluator.evaluate(example_candidates())
    for result in results:
        assert result.verdict is Verdict.CORRECT, f"{result.problem}: {result.message}"
        assert result.max_abs_error is not None and result.max_abs_error < 1e-3
        assert ("/dev/shm" in result.environment.isolation) is bool(support().pid_namespace and support().private_shm)
    cheats = {cheat_id(p): p for p in cheat_paths()}
    for name in ("constant_output", "uninit_tail", "output_cache", "hardcoded_size", "subsample_rows", "fp16_matmul"):
        header = cheat_header(cheats[f"triton/{name}"])
        result = ipc_evaluator.evaluate([cheat_candidate(cheats[f"triton/{name}"])])[0]
        assert result.verdict is not Verdict.CORRECT, name
        assert wrong_output_family(header["check"]) & {f.check for f in result.findings if f.severity is Severity.ERROR}, (name, result.message)


def test_gpu_inputs_drawn_on_the_device_or_on_the_cpu_alike(example_problems):
    """Inputs are drawn on the GPU; a get_inputs that needs the CPU (it mixes in NumPy)
    falls back there in every process alike, so the candidate still sees the reference's
    inputs. With eval.large_problem_mb=0 every problem is 'large': candidates run their
    trials and timing one at a time, and are still all correct."""
    import torch

    from kz_core.config import load_config
    from kz_core.evaluate import Evaluator
    from kz_core.evaluate.execution import make_inputs
    from kz_core.model import Problem

    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")
    vector_add = next(p for p in example_problems if p.name == "1_vector_add")
    module = type(torch)("vector_add")
    exec(vector_add.code, module.__dict__)
    drawn = make_inputs(module, 7, "cuda")
    assert all(x.is_cuda for x in drawn)
    torch.manual_seed(7)
    assert not torch.equal(drawn[0].cpu(), torch.randn(module.n))  # not the CPU's draw
    numpy_code = vector_add.code.replace(
        "return [torch.randn(n), torch.randn(n)]",
        "import numpy\n    a = torch.randn(n)\n    return [a, a * 0 + torch.from_numpy(numpy.random.rand(n).astype('float32'))]",
    )
    assert numpy_code != vector_add.code
    numpy_problem = Problem("7_numpy_inputs", numpy_code)
    candidate_code = next(c for c in example_candidates("triton") if c.problem == "1_vector_add").code
    config = load_config(None, ["eval.device=cuda", "eval.workers=2", "eval.cache=false", "eval.large_problem_mb=0", "eval.baselines=[eager]"]).eval
    with Evaluator([*example_problems, numpy_problem], config) as evaluator:
        results = evaluator.evaluate([*example_candidates("triton"), Candidate("7_numpy_inputs", "triton", candidate_code, "numpy")])
    for result in results:
        assert result.verdict is Verdict.CORRECT, f"{result.problem}: {result.message}"
        assert result.runtime is not None and result.runtime.clock == "cuda_graph"


#: The linear problem's candidate: its layer declared as the reference's, its output copied
#: by a Triton kernel (``CPU_DRAWN`` draws the same layer's weights by the CPU's generator).
LINEAR_CANDIDATE = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offsets, tl.load(src + offsets, mask=offsets < n), mask=offsets < n)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        y = torch.nn.functional.linear(x, self.linear.weight, self.linear.bias)
        out = torch.empty_like(y)
        _copy[(triton.cdiv(y.numel(), 1024),)](y, out, y.numel(), BLOCK=1024)
        return out
"""

CPU_DRAWN = LINEAR_CANDIDATE.replace("self.linear = nn.Linear(features, features)", "self.linear = nn.Linear(features, features, device='cpu')")


@pytest.mark.gpu
@pytest.mark.parametrize("limit", [1, 0])
def test_gpu_a_large_problem_s_models_are_built_on_the_gpu_reference_and_candidate_alike(example_problems, limit):
    """With eval.device_init_mb at most the reference's parameters (4 MiB here), reference
    and candidate are built with the GPU as torch's default device: a candidate declaring
    the reference's layer gets its weights (correct); one drawing that layer on the CPU
    does not (incorrect), as it does get them with every model built on the CPU (0);
    one that cannot be built on the GPU says why."""
    import torch

    from kz_core.config import load_config
    from kz_core.evaluate import Evaluator
    from kz_core.model import Problem

    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")
    problem = Problem("9_linear", LINEAR_PROBLEM)
    host_only = LINEAR_CANDIDATE.replace("super().__init__()", "super().__init__()\n        self.scale = float(torch.ones(1).numpy()[0])")
    config = load_config(None, ["eval.device=cuda", "eval.workers=2", "eval.cache=false", "eval.guards=warn", "eval.baselines=[eager]", f"eval.device_init_mb={limit}"]).eval
    with Evaluator([problem], config) as evaluator:
        same, cpu_drawn, needs_host = evaluator.evaluate(
            [Candidate("9_linear", "triton", code, name) for code, name in ((LINEAR_CANDIDATE, "same"), (CPU_DRAWN, "cpu"), (host_only, "host"))]
        )
    assert same.verdict is Verdict.CORRECT, same.message
    if limit:
        assert cpu_drawn.verdict is Verdict.INCORRECT, cpu_drawn.message
        assert needs_host.verdict is Verdict.RUNTIME_ERROR and "eval.device_init_mb" in needs_host.message, needs_host.message
    else:
        assert cpu_drawn.verdict is Verdict.CORRECT, cpu_drawn.message
        assert needs_host.verdict is Verdict.CORRECT, needs_host.message


CLASS_INDEX_PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, logits, targets):
        return torch.nn.functional.cross_entropy(logits, targets)


batch_size = 512
num_classes = 16
input_shape = (16,)


def get_inputs():
    return [torch.randn(batch_size, *input_shape), torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []
"""


def test_gpu_a_size_variation_that_kills_the_reference_context_is_dropped(gpu_evaluator):
    """Rebinding num_classes (but not input_shape) draws class indices past the logits:
    a device-side assert in the reference worker. The reference's trials still come back,
    without a size variation, and the worker is replaced for the next request."""
    from kz_core.model import Problem

    problem = Problem("8_class_index", CLASS_INDEX_PROBLEM)
    record = gpu_evaluator.references.get(problem)
    assert not record.error, record.error
    assert record.variant is None
    seeds = gpu_evaluator.seeds
    assert len(record.trials) == len(seeds.trials) + len(seeds.timing) + len(seeds.unseen)
    again = gpu_evaluator.references.get(Problem("8_class_index_renamed", CLASS_INDEX_PROBLEM + "\n# another hash\n"))
    assert not again.error, again.error


def test_gpu_a_forward_that_synchronises_is_still_timed_as_graph_replays(example_problems):
    """A forward that synchronises cannot itself go into a CUDA graph, but what is timed is
    its recorded plan, replayed by the executor, which holds no synchronisation: it is
    timed as graph replays like any other, against baselines timed the same way. Its
    candidate worker's failed capture (the recording under capture) broke torch's CUDA
    generator there; the worker is never reused, so the next candidate (one worker only)
    is unaffected."""
    import torch

    from kz_core.config import load_config
    from kz_core.evaluate import Evaluator

    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")
    code = next(c for c in example_candidates("triton") if c.problem == "1_vector_add").code
    synchronising = code.replace("        return add(a, b)", "        torch.cuda.synchronize()\n        return add(a, b)")
    assert synchronising != code
    config = load_config(None, ["eval.device=cuda", "eval.workers=1", "eval.cache=false"]).eval
    with Evaluator(example_problems, config) as evaluator:
        synced = evaluator.evaluate([Candidate("1_vector_add", "triton", synchronising, "sync")])[0]
        plain = evaluator.evaluate([Candidate("1_vector_add", "triton", code, "plain")])[0]
    assert synced.verdict is Verdict.CORRECT, synced.message
    assert synced.runtime is not None and synced.runtime.clock == "cuda_graph"
    assert {b.clock for b in synced.baselines.values()} == {"cuda_graph"}
    assert set(synced.speedups) == {"eager", "compile"}
    assert plain.verdict is Verdict.CORRECT, plain.message
    assert plain.runtime is not None and plain.runtime.clock == "cuda_graph"
    assert {b.clock for b in plain.baselines.values()} == {"cuda_graph"}


@pytest.mark.parametrize("method", ["graph", "events"])
def test_gpu_every_timed_call_is_checked_not_only_the_first_and_last(method):
    """Written against the version before, whose graph timing compared calls 0, 1, n-2 and
    n-1 of the last replay only (events timing, each set's last call): a forward wrong on
    one call in seven (a counter on the device, as a kernel could keep in a buffer of its
    own) was timed as correct whenever the counter spared those calls. And one that, on
    those calls, writes nothing: its output's memory held the answer of an earlier replay
    (or, with events, of an earlier call whose memory the allocator reused) until every
    kept output was poisoned before each replay."""
    import torch

    from kz_core.evaluate.correctness import Agreement
    from kz_core.evaluate.timing import TimingSettings, time_forward

    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")
    counter = torch.zeros((), dtype=torch.int64, device="cuda")

    def make(seed):
        return [torch.randn(4096, device="cuda", generator=torch.Generator("cuda").manual_seed(seed))]

    def honest(x):
        return x * 2

    def sometimes_wrong(x):
        counter.add_(1)
        return torch.where((counter > 4) & (counter % 7 == 3), torch.zeros_like(x), x * 2)

    def sometimes_stale(x):  # leaves what its output's memory held: an earlier call's answer
        counter.add_(1)
        out = torch.empty_like(x)
        return out.copy_(torch.where((counter > 4) & (counter % 7 == 3), out, x * 2))

    settings = TimingSettings(method=method, min_trials=12, max_trials=40, max_calls_per_replay=64, l2_flush_bytes=1 << 20)
    fine = time_forward(honest, make, [3, 5], [7, 11], "cuda", settings, agree=Agreement())
    assert fine.disagreement == "" and fine.stats["clock"] == ("cuda_graph" if method == "graph" else "cuda_events")
    assert fine.stats["calls_per_trial"] == (64 if method == "graph" else 1)
    assert [seed for seed, _ in fine.outputs] == [3, 5]
    for seed, output in fine.outputs:
        torch.testing.assert_close(output, make(seed)[0] * 2)
    for cheat in (sometimes_wrong, sometimes_stale):
        caught = time_forward(cheat, make, [3, 5], [7, 11], "cuda", settings, agree=Agreement())
        assert "differs from the first on the same inputs" in caught.disagreement, (cheat.__name__, caught.disagreement)


@pytest.mark.parametrize("method", ["graph", "events"])
def test_gpu_a_forward_that_memoises_is_timed_on_unseen_inputs(method):
    """Written against timing whose trials repeated two input sets and nothing else: the
    memoising cheat (tests/cheats/triton/memoise_seen_inputs.py: a fingerprint of a few
    elements, a table of kept products in buffers of its module) was timed copying. Calls
    after the timed ones, each on inputs never seen, are timed too and returned for
    checking: an honest forward takes its usual time there, the memoiser its real one."""
    import importlib.util

    import torch

    from kz_core.evaluate.correctness import Agreement
    from kz_core.evaluate.judge import judge_unseen
    from kz_core.evaluate.timing import TimingSettings, time_forward
    from kz_core.model import RuntimeStats

    from .conftest import CHEATS

    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")
    spec = importlib.util.spec_from_file_location("kz_test_memoiser", CHEATS / "triton" / "memoise_seen_inputs.py")
    cheat_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cheat_module)

    def make(seed):
        generator = torch.Generator("cuda").manual_seed(seed)
        return [torch.randn(96, 80, device="cuda", generator=generator), torch.randn(80, 72, device="cuda", generator=generator)]

    unseen = [13, 17, 19, 23]
    settings = TimingSettings(method=method, min_trials=12, max_trials=40, max_calls_per_replay=64, l2_flush_bytes=1 << 20)
    for name, forward in (("honest", lambda a, b: torch.mm(a, b)), ("memoiser", cheat_module.ModelNew().cuda())):
        timed = time_forward(forward, make, [3, 5], [7, 11], "cuda", settings, agree=Agreement(), unseen=unseen)
        seeds = [seed for seed, _ in timed.outputs]
        assert seeds[:2] == [3, 5] and sorted(seeds[2:]) == unseen, (name, seeds)
        for seed, output in timed.outputs:
            a, b = make(seed)
            torch.testing.assert_close(output, a @ b, atol=1e-4, rtol=1e-4)
        assert timed.disagreement == ""
        _, finding = judge_unseen(RuntimeStats(**timed.stats))
        ratio = timed.stats["unseen_ms"] / timed.stats["median_ms"]
        if name == "honest":
            assert finding is None, (method, ratio, timed.stats)
        elif method == "graph":
            assert finding is not None and finding.check == "memoisation", (ratio, timed.stats)
        # With events, the host's latency in every trial (measured on the H200: a median of
        # 0.21 ms, 1.17 times that on unseen inputs) hides what memoising saves here.


def test_gpu_graph_timing_of_a_large_problem_holds_four_footprints_at_most():
    """A large problem's graph timing (two calls, every input set larger than the
    buffers' budget) holds its two captured input buffers, its two kept outputs, their
    copies for the caller and the unseen calls' outputs. Its timing inputs' own copies go
    back once they are in the buffers: kept through the unseen replays, as before the
    fortieth session, they made five footprints (inputs and outputs of one call) of a
    forward whose output is as large as its input, where a reservation holds 1.5."""
    import torch

    from kz_core.evaluate.correctness import Agreement
    from kz_core.evaluate.timing import TimingSettings, time_forward

    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")
    elements = 64 << 20  # 256 MiB of float32: two input sets fill the buffers' budget

    def make(seed):
        generator = torch.Generator("cuda").manual_seed(seed)
        return [torch.randn(elements, device="cuda", generator=generator)]

    footprint = 2 * elements * 4  # one call's input and output
    flush = 16 << 20
    settings = TimingSettings(min_trials=4, max_trials=8, l2_flush_bytes=flush)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    timed = time_forward(lambda x: x * 2, make, [3, 5], [7, 11], "cuda", settings, agree=Agreement(), unseen=[13, 17])
    peak = torch.cuda.max_memory_allocated() - before
    assert timed.stats["clock"] == "cuda_graph" and timed.stats["calls_per_trial"] == 2, timed.stats
    for seed, output in timed.outputs:
        torch.testing.assert_close(output, make(seed)[0] * 2)
    assert peak <= 4 * footprint + flush + (8 << 20), f"{peak / footprint:.2f} footprints"


def _share_and_release(connection, release: bool) -> None:
    """A sender of the IPC protocol (another process): share one tensor, wait until the
    receiver is done, give the count back (or not), drop the tensor, and report how much of
    the allocator's memory is still allocated against before the drop."""
    import torch

    from kz_core.evaluate import execution

    shared = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
    torch.cuda.synchronize()
    connection.send(execution.share_cuda_tensor(shared))
    connection.recv()
    held = torch.cuda.memory_allocated()
    if release:
        execution.release_shared_counters()
    del shared
    torch.cuda.synchronize()
    connection.send((held, torch.cuda.memory_allocated()))
    connection.recv()


@pytest.mark.parametrize("release", [True, False], ids=["released", "never-released"])
def test_gpu_a_shared_output_is_read_by_its_handle_and_freed_once_given_back(release, monkeypatch):
    """The receiver opens the memory handle alone (no count, no event of the sender's: they
    live in the sender's /dev/shm, a private one in the sandbox) and reads the sender's
    values; the sender's memory is freed when it gives its count back, and kept (torch's
    limbo) while it has not, so release_shared_counters is what frees it."""
    import multiprocessing

    import torch

    from kz_core.evaluate.execution import open_shared_cuda_tensor

    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")
    torch.cuda.init()
    # The spawned sender imports this module by its name under --import-mode=importlib
    # (tests.evaluate.test_gpu): the repository's root must be on the path it inherits,
    # which `python -P` (the GPU session's) leaves out.
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    context = multiprocessing.get_context("spawn")
    mine, theirs = context.Pipe()
    sender = context.Process(target=_share_and_release, args=(theirs, release))
    sender.start()
    theirs.close()  # so that a sender that dies is an EOFError here, not a wait without end
    try:
        description = mine.recv()
        received = open_shared_cuda_tensor(description)
        assert torch.equal(received, torch.arange(1 << 20, device="cuda", dtype=torch.float32))
        view = open_shared_cuda_tensor(description, copy=False)
        assert torch.equal(view, received)
        del view
        torch.cuda.synchronize()
        mine.send("done")
        held, after = mine.recv()
        if release:
            assert held - after >= 4 << 20, (held, after)
        else:
            assert held - after < 4 << 20, (held, after)  # the version before's receiver gave it back; now only the sender does
        mine.send("bye")
    finally:
        sender.join(60)
        if sender.is_alive():
            sender.kill()
