"""cuda_inline on a GPU (``pytest -m gpu``): KernelBench-format candidates built with
``load_inline`` in the workers, cached, run, proven by the profiler trace, and judged.

Honest examples in both CUDA formats (the kz NVRTC API and load_inline) are correct; every
cuda_inline cheat in ``tests/cheats/`` (``cuda/cpp_stream.py`` and ``cuda_inline/*.py``) is
caught by the check its header names. Everything that must be built is evaluated in one
batch by eight workers, so that the cold builds (about a minute each) run in parallel.
load_inline needs nvcc: where none is found (``torch.utils.cpp_extension.CUDA_HOME`` is
None) the build tests skip, with the reason, and one test checks that the backend says so
instead of building.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from kz_core.model import Candidate, Severity, Verdict

from kz_backend_cuda.inline_build import toolchain

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")]

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples" / "candidates"
INLINE_EXAMPLES = sorted(path.stem for path in (EXAMPLES / "cuda_inline").glob("*.py"))
#: Why load_inline cannot build here ("" when it can).
BUILD_PROBLEM = toolchain("cuda:0").problem
needs_build = pytest.mark.skipif(bool(BUILD_PROBLEM), reason=BUILD_PROBLEM or "-")
BROKEN = (EXAMPLES / "cuda_inline" / "1_vector_add.py").read_text().replace("out[i] = a[i] + b[i];", "out[i] = a[i] + c[i];")
#: The honest vector add, whose process forges the clock it could time itself with (through
#: an alias, which the static checks do not follow).
FORGED_CLOCK = (EXAMPLES / "cuda_inline" / "1_vector_add.py").read_text() + """

_event = torch.cuda.Event
_event.elapsed_time = lambda self, end: 1e-6  # every event interval: a nanosecond
"""
#: An honest kernel that keeps a workspace from one call to the next (a static tensor of its
#: C++ code, allocated on the first call): a plan cannot point at memory the recorded call
#: did not get from torch, so it runs unverified, and correct.
KEPT_WORKSPACE = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void set_scale_kernel(float* workspace, float scale) { workspace[0] = scale; }

__global__ void scaled_relu_kernel(const float* x, float* out, const float* workspace, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; out[i] = (v > 0.0f ? v : 0.0f) * workspace[0]; }
}

torch::Tensor scaled_relu_cuda(torch::Tensor x, double scale) {
    static torch::Tensor workspace;  // allocated once, reused by every call
    if (!workspace.defined()) workspace = torch::empty({1}, x.options());
    auto x_c = x.contiguous();
    auto out = torch::empty_like(x_c);
    auto stream = c10::cuda::getCurrentCUDAStream();
    long long n = x_c.numel();
    set_scale_kernel<<<1, 1, 0, stream>>>(workspace.data_ptr<float>(), (float)scale);
    scaled_relu_kernel<<<(unsigned int)((n + 255) / 256), 256, 0, stream>>>(x_c.data_ptr<float>(), out.data_ptr<float>(), workspace.data_ptr<float>(), n);
    return out;
}
"""

module = load_inline(
    name="kz_test_kept_workspace",
    cpp_sources="torch::Tensor scaled_relu_cuda(torch::Tensor x, double scale);",
    cuda_sources=cuda_source,
    functions=["scaled_relu_cuda"],
)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return module.scaled_relu_cuda(x, float(self.scale))
'''


def cheat_header(path: Path) -> dict[str, str]:
    """A cheat's ``# key: value`` header (backend: its folder's name unless it names one)."""
    header = dict(re.findall(r"^# (problem|expect|check|gpu_only|backend): (\S+)", path.read_text(), re.MULTILINE))
    header.setdefault("backend", path.parent.name)
    return header


INLINE_CHEATS = [path for path in sorted((REPO / "tests" / "cheats").glob("*/*.py")) if cheat_header(path)["backend"] == "cuda_inline"]


def cheat_id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def errors(result) -> list[str]:
    return [f.check for f in result.findings if f.severity is Severity.ERROR]


@pytest.fixture(scope="module")
def inline_evaluator():
    """A GPU evaluator with eight workers: eight candidates build at once (two compiler
    processes each)."""
    from kz_core.config import load_config
    from kz_core.evaluate import Evaluator
    from kz_core.problems import load_problems

    config = load_config(None, ["eval.device=cuda", "eval.workers=8", "eval.cache=false", "eval.baselines=[eager]"]).eval
    with Evaluator(load_problems("examples").problems, config) as evaluator:
        yield evaluator


@pytest.fixture(scope="module")
def inline_results(inline_evaluator):
    """Examples in both formats, every cuda_inline cheat, the racy kernel once more, and a
    broken candidate, evaluated in one batch; by sample id."""
    candidates = [Candidate(p, "cuda_inline", (EXAMPLES / "cuda_inline" / f"{p}.py").read_text(), f"inline-{p}") for p in INLINE_EXAMPLES]
    candidates += [Candidate(p, "cuda", (EXAMPLES / "cuda" / f"{p}.py").read_text(), f"nvrtc-{p}") for p in INLINE_EXAMPLES]
    candidates += [Candidate(cheat_header(p)["problem"], "cuda_inline", p.read_text(), cheat_id(p)) for p in INLINE_CHEATS]
    racy = REPO / "tests" / "cheats" / "cuda_inline" / "racy_kernel.py"
    candidates.append(Candidate("4_row_sum", "cuda_inline", racy.read_text(), "racy-again"))
    candidates.append(Candidate("1_vector_add", "cuda_inline", BROKEN, "broken"))
    candidates.append(Candidate("1_vector_add", "cuda_inline", FORGED_CLOCK, "forged-clock"))
    candidates.append(Candidate("2_scaled_relu", "cuda_inline", KEPT_WORKSPACE, "kept-workspace"))
    return {result.sample_id: result for result in inline_evaluator.evaluate(candidates)}


@pytest.mark.skipif(not BUILD_PROBLEM, reason="load_inline can build here: the build tests run instead")
def test_without_nvcc_the_backend_says_so_and_runs_nothing(inline_evaluator):
    code = (EXAMPLES / "cuda_inline" / "1_vector_add.py").read_text()
    result = inline_evaluator.evaluate([Candidate("1_vector_add", "cuda_inline", code, "no-nvcc")])[0]
    assert result.verdict is Verdict.RUNTIME_ERROR, result.message
    assert "not_run" in errors(result)
    assert BUILD_PROBLEM in result.message  # "cuda_inline needs nvcc (CUDA_HOME) to build: none found (...)"


@needs_build
def test_examples_in_both_cuda_formats_are_correct(inline_results):
    assert len(INLINE_EXAMPLES) >= 3
    for prefix in ("inline", "nvrtc"):
        for problem in INLINE_EXAMPLES:
            result = inline_results[f"{prefix}-{problem}"]
            assert result.verdict is Verdict.CORRECT, f"{result.sample_id}: {result.message}"
            assert result.launches and result.launches >= 1, result.sample_id
            assert result.runtime is not None and result.runtime.clock == "cuda_graph", result.runtime
            assert "eager" in result.speedups, result.findings
    for problem in INLINE_EXAMPLES:
        result = inline_results[f"inline-{problem}"]
        notes = [f.message for f in result.findings if f.check == "backend"]
        assert notes and notes[0].startswith("load_inline: built and loaded"), notes
        # Recorded through CUPTI and replayed by the executor from kz's own build.
        assert "unverified_execution" not in [f.check for f in result.findings], result.findings


@needs_build
def test_a_clock_forged_in_the_candidates_process_times_nothing(inline_results):
    """Before: a cuda_inline candidate was timed in its own process, whose CUDA events it
    could rewrite (a nanosecond per call: a speedup in the thousands). Its launches are now
    replayed and timed by the executor, which runs none of its host code."""
    forged, honest = inline_results["forged-clock"], inline_results["inline-1_vector_add"]
    assert forged.verdict is Verdict.CORRECT, forged.message
    assert "unverified_execution" not in [f.check for f in forged.findings], forged.findings
    assert forged.speedups["eager"] < 4 * max(honest.speedups["eager"], 1.0), (forged.speedups, honest.speedups)


@needs_build
def test_host_code_a_plan_cannot_describe_is_refused_unless_unverified_runs_are_asked_for(inline_results):
    """An honest kernel whose launches read a workspace its C++ code keeps between calls
    cannot be recorded for the trusted executor. Run in its own process it would be judged
    on what that process says, which a cheat writes as it likes (the unverified fallback a
    `cudaMemcpyToSymbol` was enough to choose): refused by default, with the reason and
    the setting that runs it there anyway; so run, it is correct and says so."""
    from kz_core.config import load_config
    from kz_core.evaluate import Evaluator
    from kz_core.evaluate.judge import UNVERIFIED_REFUSED
    from kz_core.problems import load_problems

    refused = inline_results["kept-workspace"]
    assert refused.verdict is not Verdict.CORRECT, refused.message
    finding = next(f for f in refused.findings if f.check == "not_replayable")
    assert "GPU memory that no tensor of this call holds" in finding.message and UNVERIFIED_REFUSED in finding.message
    config = load_config(None, ["eval.device=cuda", "eval.workers=2", "eval.cache=false", "eval.baselines=[eager]", "eval.unverified_fallback=true"]).eval
    with Evaluator(load_problems("examples").problems, config) as evaluator:
        (result,) = evaluator.evaluate([Candidate("2_scaled_relu", "cuda_inline", KEPT_WORKSPACE, "kept-workspace-unverified")])
    assert result.verdict is Verdict.CORRECT, result.message
    warning = next(f for f in result.findings if f.check == "unverified_execution")
    assert "GPU memory that no tensor of this call holds" in warning.message, warning.message


@needs_build
@pytest.mark.parametrize("path", INLINE_CHEATS, ids=cheat_id)
def test_every_inline_cheat_is_caught_by_its_named_check(inline_results, path):
    header = cheat_header(path)
    result = inline_results[cheat_id(path)]
    assert result.verdict.value in header["expect"].split("|"), result.message
    expected = {"mismatch", "non_finite"} if header["check"] == "mismatch" else set(header["check"].split("|"))  # poison reads as NaN
    assert expected & set(errors(result)), f"expected {header['check']}, got {errors(result)}: {result.message}"


@needs_build
def test_a_racy_kernel_is_caught_on_every_run(inline_results):
    for result in (inline_results["cuda_inline/racy_kernel"], inline_results["racy-again"]):
        assert result.verdict is Verdict.INCORRECT, result.message
        assert {"mismatch", "non_finite"} & set(errors(result)), result.message


@needs_build
def test_compiler_errors_come_back_with_nvccs_log_and_the_candidates_line(inline_results):
    result = inline_results["broken"]
    assert result.verdict is Verdict.COMPILE_ERROR, result.message
    finding = next(f for f in result.findings if f.check == "compile_error")
    assert finding.line == next(number for number, line in enumerate(BROKEN.splitlines(), start=1) if "c[i]" in line)
    assert 'identifier "c" is undefined' in finding.message


@needs_build
def test_a_second_candidate_with_the_same_source_loads_the_shared_build(inline_evaluator, inline_results):
    """Builds are made by kz's trusted builder, never by a candidate's process, and shared
    under the key of their sources, flags and toolchain: the same sources load the library
    the first candidate's deferred build left (kz_core/evaluate/builds.py)."""
    code = (EXAMPLES / "cuda_inline" / "1_vector_add.py").read_text()
    result = inline_evaluator.evaluate([Candidate("1_vector_add", "cuda_inline", code, "again")])[0]
    assert result.verdict is Verdict.CORRECT, result.message
    note = next(f.message for f in result.findings if f.check == "backend")
    assert note.startswith("load_inline: ") and note.endswith("(cached)"), note


@needs_build
def test_the_profiler_trace_shows_the_declared_kernel_once_per_call(inline_results, tmp_path, monkeypatch):
    """The proof of launch end to end in this process: the trace names the candidate's
    kernel as the profiler spells it, and the stream marker runs too."""
    from torch.utils import cpp_extension

    from kz_backend_cuda import inline
    from kz_backend_cuda.traces import MARKER_KERNEL, count_declared_launches, kernel_name_parts, traced_call

    monkeypatch.setattr(cpp_extension, "load_inline", cpp_extension.load_inline)  # torch's own again afterwards
    code = (EXAMPLES / "cuda_inline" / "1_vector_add.py").read_text()
    compiled = inline.compile_candidate(Candidate("1_vector_add", "cuda_inline", code, "trace"), "cuda:0", tmp_path)
    assert inline.candidate_kernels(compiled) == ["add_kernel"], compiled
    model = compiled.model_class()
    a, b = torch.randn(10_000, device="cuda"), torch.randn(10_000, device="cuda")
    outputs, names = traced_call(model, [a, b])
    assert torch.equal(outputs, a + b)
    assert count_declared_launches(names, ["add_kernel"]) == {"add_kernel": 1}, names
    assert any(kernel_name_parts(name)[-1] == MARKER_KERNEL for name in names), names
