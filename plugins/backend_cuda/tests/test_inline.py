"""cuda_inline (KernelBench's load_inline format) on a CPU: building, caching, timeouts,
compiler errors, and the honest "compiled, not run" outcome.

The build machinery is tested with a stand-in build command (no CUDA toolkit needed); the
tests marked ``slow`` build with the machine's real toolchain and expect what it allows:
compiled but not linked where nvcc is found (torch is a CPU build here), "needs nvcc"
where it is not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kz_core import COMPILE_TIMEOUT_ENV
from kz_core.backend import CompiledCandidate, CompileFailure
from kz_core.model import Candidate, Verdict
from kz_core.plugins import get_plugin_manager

from kz_backend_cuda import inline, inline_build
from kz_backend_cuda.api import CudaUnavailableError
from kz_backend_cuda.inline_build import BuildRecord, Prelude, Toolchain

SIMPLE = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void add_kernel(const float* a, const float* b, float* out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    long long n = a.numel();
    add_kernel<<<(n + 255) / 256, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

module = load_inline(name="kz_test_add", cpp_sources="torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b);", cuda_sources=cuda_source, functions=["add_cuda"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        return module.add_cuda(a, b)
'''
BROKEN = SIMPLE.replace("out[i] = a[i] + b[i];", "out[i] = a[i] + c[i];")
ARGUMENTS = {"name": "ext", "cpp_sources": "int f();", "cuda_sources": "__global__ void k(float* x) {}", "functions": ["f"]}
FAKE_TOOLS = Toolchain(cuda_home="/opt/fake-cuda", nvcc="13.0", arch_list="9.0", torch_cuda="13.0")


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KZ_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def fake_child(tmp_path, monkeypatch):
    """Replace the build child with a script: ``fake_child(body)`` runs ``body`` with
    ``request`` (the parsed request) and ``result`` (the result file's path) defined."""
    monkeypatch.setattr(inline_build, "toolchain", lambda device: FAKE_TOOLS)
    monkeypatch.setattr(inline_build, "USE_PRELUDE", False)  # the stand-in makes extensions only

    def install(body: str) -> None:
        script = tmp_path / "fake_build.py"
        script.write_text("import json, sys, time\nrequest = json.loads(open(sys.argv[1]).read())\nresult = sys.argv[2]\n" + textwrap.dedent(body))
        monkeypatch.setattr(inline_build, "BUILD_COMMAND", (sys.executable, str(script)))

    return install


def compile_hook(code: str, tmp_path: Path):
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    return get_plugin_manager().hook.backend_compile(candidate=Candidate("1_vector_add", "cuda_inline", code), device="cpu", workdir=workdir)


# -- keys and records -------------------------------------------------------------------------


def test_build_key_follows_sources_flags_and_toolchain_only():
    key = inline_build.build_key(ARGUMENTS, FAKE_TOOLS)
    assert key == inline_build.build_key(dict(ARGUMENTS), FAKE_TOOLS)
    changed = [
        {**ARGUMENTS, "cuda_sources": "__global__ void k(float* y) {}"},
        {**ARGUMENTS, "extra_cuda_cflags": ["-O3"]},
        {**ARGUMENTS, "name": "other"},
    ]
    tools = [
        Toolchain("/opt/fake-cuda", "13.0", "10.0", "13.0"),
        Toolchain("/opt/fake-cuda-12", "12.8", "9.0", "13.0"),  # another toolkit (its nvcc: test below)
        Toolchain("/opt/fake-cuda", "13.0", "9.0", ""),  # torch without CUDA: compile only
    ]
    keys = {inline_build.build_key(arguments, FAKE_TOOLS) for arguments in changed}
    keys |= {inline_build.build_key(ARGUMENTS, toolchain) for toolchain in tools}
    assert key not in keys and len(keys) == len(changed) + len(tools)
    assert inline_build.build_folder(key).parent == Path(os.environ["KZ_CACHE_DIR"]) / "torch_extensions"


def test_the_stand_in_ignores_the_arguments_kz_decides(fake_child, monkeypatch):
    fake_child("""
    open(result, "w").write(json.dumps({"status": "checked", "message": "not linked"}))
    """)
    seen = []
    original = inline_build.build
    monkeypatch.setattr(inline_build, "build", lambda arguments, tools, timeout: seen.append(arguments) or original(arguments, tools, timeout))
    inline.load_inline("ext", "int f();", "__global__ void k(float* x) {}", ["f"], build_directory="/tmp/elsewhere", verbose=True, use_pch=True)
    inline.load_inline("ext", "int f();", "__global__ void k(float* x) {}", ["f"])
    assert seen[0] == seen[1]
    assert not {"build_directory", "verbose", "use_pch", "keep_intermediates"} & set(seen[0])
    assert inline.EXTENSIONS[-1].kernels == ("k",) and inline.EXTENSIONS[-1].status == "checked"


def test_a_finished_build_is_found_in_the_cache_without_building(fake_child):
    fake_child("raise SystemExit('the child must not run for a cached build')")
    folder = inline_build.build_folder(inline_build.build_key(ARGUMENTS, FAKE_TOOLS))
    folder.mkdir(parents=True)
    inline_build._write_record(folder, BuildRecord("failed", seconds=61.0, message="load_inline: 1 compiler error", log="cuda.cu(3): error: x"))
    record = inline_build.build(ARGUMENTS, FAKE_TOOLS, timeout_s=5)
    assert record.cached and record.status == "failed" and record.seconds == 61.0
    inline_build._write_record(folder, BuildRecord("built", library=str(folder / "missing.so")))
    assert inline_build.read_record(folder) is None  # a library that is gone is no cache hit


def test_a_fresh_build_names_its_library_by_its_full_path_as_a_cached_one_does(fake_child, tmp_path, monkeypatch):
    """The build child names the library relative to its folder (a shared build is made
    in a builder's scratch folder and moved); a build made here is loaded by its full
    path, not one relative to whatever folder the process runs in (seen on the H200)."""
    fake_child("""
    import pathlib
    pathlib.Path(request["folder"], "ext.so").write_text("a library")
    open(result, "w").write(json.dumps({"status": "built", "library": "ext.so"}))
    """)
    monkeypatch.chdir(tmp_path)
    folder = inline_build.build_folder(inline_build.build_key(ARGUMENTS, FAKE_TOOLS))
    fresh = inline_build.build(ARGUMENTS, FAKE_TOOLS, timeout_s=60)
    assert fresh.status == "built" and not fresh.cached and fresh.library == str((folder / "ext.so").resolve())
    inline_build._write_record(folder, BuildRecord("built", library="ext.so"))  # as the child leaves it
    cached = inline_build.build(ARGUMENTS, FAKE_TOOLS, timeout_s=60)
    assert cached.cached and cached.library == fresh.library


def test_a_machine_without_nvcc_is_not_run_not_a_compile_error(tmp_path, monkeypatch):
    monkeypatch.setattr(inline_build, "find_cuda_home", lambda: "")
    tools = inline_build.toolchain("cpu")
    assert tools.problem.startswith("cuda_inline needs nvcc (CUDA_HOME) to build: none found")
    failure = compile_hook(SIMPLE, tmp_path)
    assert isinstance(failure, CompileFailure)
    assert failure.verdict is Verdict.RUNTIME_ERROR  # reported as not_run by the evaluator
    assert failure.message.startswith("cuda_inline needs nvcc (CUDA_HOME) to build: none found")


def test_an_nvcc_of_another_major_release_than_torchs_cuda_cannot_build(monkeypatch):
    import torch

    monkeypatch.setattr(inline_build, "find_cuda_home", lambda: "/opt/cuda-12")
    monkeypatch.setattr(inline_build, "nvcc_release", lambda home: "12.4")
    monkeypatch.setattr(inline_build.shutil, "which", lambda name, path=None: f"/usr/bin/{name}")
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    tools = inline_build.toolchain("cpu")
    assert tools.problem == "cuda_inline needs an nvcc of torch's CUDA 13.0: /opt/cuda-12/bin/nvcc is release 12.4"
    monkeypatch.setattr(inline_build, "nvcc_release", lambda home: "13.1")
    assert inline_build.toolchain("cpu").problem == ""


def test_the_build_key_is_the_same_whether_or_not_nvcc_answered(monkeypatch, tmp_path):
    """A process whose `nvcc --version` got no answer (a fork refused on a busy machine)
    must still name kz's builds as the builder did: the key holds nvcc's binary (path, size,
    time), not its answer. Before, it held the release, and such a worker looked under
    another key ("the two processes described the toolchain differently")."""
    home = tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "nvcc").write_text("#!/bin/sh\n")
    monkeypatch.setattr(inline_build, "find_cuda_home", lambda: str(home))
    monkeypatch.setattr(inline_build.shutil, "which", lambda name, path=None: f"/usr/bin/{name}")
    arguments = {"name": "ext", "cpp_sources": "int f();", "cuda_sources": "int f() { return 1; }"}
    monkeypatch.setattr(inline_build, "nvcc_release", lambda home: "13.0")
    answered = inline_build.build_key(arguments, inline_build.toolchain("cpu"))
    monkeypatch.setattr(inline_build, "nvcc_release", lambda home: "")
    assert inline_build.build_key(arguments, inline_build.toolchain("cpu")) == answered
    (home / "bin" / "nvcc").write_text("#!/bin/sh\n# another nvcc\n")  # a new toolkit: a new key
    assert inline_build.build_key(arguments, inline_build.toolchain("cpu")) != answered


# -- timeouts -----------------------------------------------------------------------------------


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_run_child_kills_the_build_and_every_compiler_it_started(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    script = f"import subprocess, time\np = subprocess.Popen(['sleep', '60'])\nopen({str(pid_file)!r}, 'w').write(str(p.pid))\ntime.sleep(60)\n"
    started = time.monotonic()
    with pytest.raises(inline_build.BuildTimeout):
        inline_build.run_child([sys.executable, "-c", script], dict(os.environ), 2.0, tmp_path / "out.log", tmp_path)
    assert time.monotonic() - started < 20
    grandchild = int(pid_file.read_text())
    for _ in range(50):
        if _state(grandchild) in ("gone", "Z", "X"):
            break
        time.sleep(0.1)
    assert _state(grandchild) in ("gone", "Z", "X")


def test_a_build_past_the_timeout_is_a_compile_error_that_names_it(tmp_path, fake_child, monkeypatch):
    fake_child("print('compiling main.cpp', flush=True)\ntime.sleep(60)")
    monkeypatch.setattr(inline_build, "BUILD_TIMEOUT_S", 1.5)
    started = time.monotonic()
    failure = compile_hook(SIMPLE, tmp_path)
    assert time.monotonic() - started < 30
    assert isinstance(failure, CompileFailure) and failure.verdict is Verdict.COMPILE_ERROR
    assert "ran past the cuda_inline build timeout (1.5 s for all of a candidate's builds" in failure.message
    assert "kz_test_add" in failure.message and "compiling main.cpp" in failure.log


def test_builds_end_before_the_evaluators_compile_timeout(monkeypatch):
    """A slow or busy machine given a longer ``eval.compile_timeout_s`` gives builds longer
    too (a cold build of torch's headers passed 150 s beside a loaded test suite)."""
    monkeypatch.delenv(COMPILE_TIMEOUT_ENV, raising=False)
    assert inline_build.build_timeout_s() == inline_build.BUILD_TIMEOUT_S == 150
    for given, expected in (("180", 150), ("900", 870), ("40", 20), ("junk", 150), ("0", 150), ("nan", 150)):
        monkeypatch.setenv(COMPILE_TIMEOUT_ENV, given)
        assert inline_build.build_timeout_s() == expected, given


def test_a_child_that_dies_without_a_result_is_reported(tmp_path, fake_child):
    fake_child("print('segfault, say', flush=True)\nraise SystemExit(3)")
    failure = compile_hook(SIMPLE, tmp_path)
    assert isinstance(failure, CompileFailure) and failure.verdict is Verdict.COMPILE_ERROR
    assert "exited with status 3 without a result" in failure.message and "segfault, say" in failure.log


# -- compiler errors and results --------------------------------------------------------------


def test_a_compiler_error_points_at_the_candidates_line(tmp_path, fake_child):
    # cuda.cu line 9 is line 6 of the cuda source string (torch puts 3 lines before it).
    fake_child("""
    record = {"status": "failed", "message": "load_inline: 1 compiler error building extension 'kz_test_add': identifier \\"c\\" is undefined",
              "log": "cuda.cu(9): error: identifier \\"c\\" is undefined", "source_file": "cuda.cu", "line": 9}
    open(result, "w").write(json.dumps(record))
    """)
    failure = compile_hook(BROKEN, tmp_path)
    expected = next(number for number, line in enumerate(BROKEN.splitlines(), start=1) if "c[i]" in line)
    assert isinstance(failure, CompileFailure) and failure.verdict is Verdict.COMPILE_ERROR
    assert failure.line == expected and f"candidate line {expected}" in failure.message
    assert 'identifier "c" is undefined' in failure.log


def test_source_location_maps_torchs_files_to_the_calls_sources():
    arguments = {"cpp_sources": ["int a();", "int b();\nint c();"], "cuda_sources": "l1\nl2\nl3"}
    assert inline.source_location(arguments, "main.cpp", 1) == ("", None)  # torch's include
    assert inline.source_location(arguments, "main.cpp", 2) == ("int a();", 1)
    assert inline.source_location(arguments, "main.cpp", 4) == ("int b();\nint c();", 2)
    assert inline.source_location(arguments, "main.cpp", 9) == ("", None)  # the bindings
    assert inline.source_location(arguments, "cuda.cu", 5) == ("l1\nl2\nl3", 2)
    assert inline.source_location({**arguments, "no_implicit_headers": True}, "cuda.cu", 2) == ("l1\nl2\nl3", 2)


def test_a_compiled_but_unlinked_extension_is_reported_and_cannot_be_called(tmp_path, fake_child):
    fake_child("""
    message = "not linked: torch 2.13.0+cpu is a build without CUDA, which cannot link or load CUDA extensions"
    open(result, "w").write(json.dumps({"status": "checked", "seconds": 42.0, "message": message}))
    """)
    compiled = compile_hook(SIMPLE, tmp_path)
    assert isinstance(compiled, CompiledCandidate) and compiled.backend == "cuda_inline"
    note = compiled.notes[0]
    assert note.startswith("load_inline: compiled kz_test_add (kernels: add_kernel) with nvcc 13.0 for TORCH_CUDA_ARCH_LIST=9.0 in 42.0 s")
    assert "not linked: torch 2.13.0+cpu is a build without CUDA" in note
    assert inline.candidate_kernels(compiled) == ["add_kernel"]
    with pytest.raises(CudaUnavailableError, match="add_cuda: the extension compiled but was not linked"):
        compiled.namespace["module"].add_cuda(1, 2)


def test_readable_log_and_first_error_read_nvcc_and_gcc_output(tmp_path):
    folder = tmp_path / "build"
    output = "\n".join(
        [
            f"[1/3] /usr/local/cuda/bin/nvcc -c {folder}/cuda.cu -o cuda.cuda.o",
            "FAILED: cuda.cuda.o",
            f"/usr/local/cuda/bin/nvcc -c {folder}/cuda.cu -o cuda.cuda.o",
            f'{folder}/cuda.cu(20): error: namespace "at::cuda" has no member "getCurrentCUDAStream"',
            f"{folder}/main.cpp:7:5: error: 'g' was not declared in this scope",
            "2 errors detected in the compilation of cuda.cu.",
        ]
    )
    log = inline_build.readable_log(output, folder)
    assert "nvcc -c" not in log and str(folder) not in log
    assert log.splitlines()[1].startswith('cuda.cu(20): error: namespace "at::cuda"')
    assert inline_build.first_error(log) == ("cuda.cu", 20, 'namespace "at::cuda" has no member "getCurrentCUDAStream"')
    assert inline_build.first_error("main.cpp:7:5: error: 'g' was not declared in this scope") == ("main.cpp", 7, "'g' was not declared in this scope")
    assert inline_build.first_error("ninja: build stopped") == ("", None, "")


def test_a_header_missing_from_the_toolkit_is_the_machines_fault_not_the_candidates():
    import torch

    include = os.path.join(os.path.dirname(torch.__file__), "include")
    log = (
        f"In file included from {include}/ATen/cuda/CUDAContext.h:4,\n                 from cuda.cu:7:\n"
        f"{include}/ATen/cuda/CUDAContextLight.h:10:10: fatal error: cusparse.h: No such file or directory"
    )
    gap = inline_build.toolkit_gap(log, "/usr/local/cuda")
    assert gap == "cannot compile here: cusparse.h (included by ATen/cuda/CUDAContextLight.h) is missing from the CUDA toolkit at /usr/local/cuda"
    assert inline_build.toolkit_gap("cuda.cu:3:10: fatal error: my_header.h: No such file or directory", "/usr/local/cuda") == ""


def test_a_cuda_librarys_header_missing_from_the_toolkit_is_the_machines_fault():
    """Written against the version before, where a published kernel calling cuBLAS
    (``#include <cublas_v2.h>`` in its own source) was the candidate's ``compile_error`` on
    a toolkit installed without cuBLAS: only headers torch's or CUDA's own headers include
    counted as the machine's gap. A CUDA library's header does too; the candidate's own
    headers do not."""
    for header in ("cublas_v2.h", "cublasLt.h", "cudnn.h", "curand_kernel.h", "cusolverDn.h", "cufft.h"):
        gap = inline_build.toolkit_gap(f"cuda.cu:6:10: fatal error: {header}: No such file or directory", "/usr/local/cuda")
        assert gap == f"cannot compile here: {header} (included by cuda.cu) is missing from the CUDA toolkit at /usr/local/cuda, which lacks that CUDA library's headers"
    nvcc = 'cuda.cu(6): catastrophic error: cannot open source file "cublas_v2.h"'
    assert inline_build.toolkit_gap(nvcc, "/usr/local/cuda").startswith("cannot compile here: cublas_v2.h")
    for header in ("cublas_helpers.hpp", "my_cublas.h", "cuda_fp16_extra.h"):
        assert inline_build.toolkit_gap(f"cuda.cu:6:10: fatal error: {header}: No such file or directory", "/usr/local/cuda") == ""
    # A record cached by a kz that judged it the candidate's error is read back as the gap.
    import types

    tools = types.SimpleNamespace(cuda_home="/usr/local/cuda")
    stale = inline_build.BuildRecord("failed", message="load_inline: 1 compiler error", log="cuda.cu:6:10: fatal error: cublas_v2.h: No such file or directory")
    with pytest.raises(inline_build.InlineBuildError) as raised:
        inline_build._from_cache(stale, tools)
    assert raised.value.unavailable and "cublas_v2.h" in raised.value.message
    own = inline_build.BuildRecord("failed", message="load_inline: 1 compiler error", log="cuda.cu:6:10: error: expected ';'")
    assert inline_build._from_cache(own, tools).cached


def test_the_architecture_list_follows_the_environment_without_a_gpu(monkeypatch):
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0;9.0")
    assert inline_build.arch_list("cpu") == "8.0;9.0"
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST")
    monkeypatch.setenv("KZ_CUDA_ARCH", "sm_100a")
    assert inline_build.arch_list("cpu") == "10.0a"
    monkeypatch.delenv("KZ_CUDA_ARCH")
    assert inline_build.arch_list("cpu") == "9.0"


# -- the real toolchain ---------------------------------------------------------------------------


def kz(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kz_core.cli", *args], capture_output=True, text=True, cwd=cwd, env={**os.environ, "COLUMNS": "200"})


# -- the prelude: precompiled torch/extension.h, light cuda.cu ---------------------------------


def test_the_light_path_blanks_only_the_lines_that_include_torch_extension_h():
    source = '#include <torch/extension.h>\n#include <cuda_runtime.h>\n  #  include "torch/extension.h" // all of torch\nint x; // #include <torch/extension.h>\n'
    light = inline_build.light_sources(source)
    assert light.splitlines() == ["", "#include <cuda_runtime.h>", "", "int x; // #include <torch/extension.h>"]
    assert light.count("\n") == source.count("\n")  # nvcc's line numbers stay the candidate's
    assert inline_build.light_sources([source, "int y;"]) == [light, "int y;"]
    assert inline_build.light_sources("#include <torch/types.h>\nint y;") is None  # nothing to gain
    assert inline_build.light_sources(None) is None and inline_build.light_sources([1]) is None


def test_a_prelude_is_chosen_by_kz_from_an_allow_list_never_by_the_candidates_text(tmp_path):
    assert inline_build.prelude_arguments({"extra_cflags": None})["optimisation"] == ""
    assert inline_build.prelude_arguments({"extra_cflags": ["-O2", "-DX", "-O3 -fno-math-errno"]})["optimisation"] == "-O3"
    assert inline_build.prelude_arguments({"extra_cflags": ["-fplugin=/tmp/evil.so", "-O3;rm -rf /"]})["optimisation"] == ""
    assert inline_build.prelude_arguments({"extra_cflags": "-O3"})["optimisation"] == ""  # not a list: torch would not take it either
    assert inline_build.is_prelude(inline_build.prelude_arguments({})) and not inline_build.is_prelude(ARGUMENTS)
    # A candidate may put any arguments in its deferred builds' list; a prelude's flag that
    # is not on the list is refused before a compiler runs.
    forged = {**inline_build.prelude_arguments({}), "optimisation": "-fplugin=/tmp/evil.so"}
    record = inline_build.build_prelude_into(tmp_path / "p", forged, FAKE_TOOLS, 5)
    assert record.status == "failed" and "not a prelude kz builds" in record.message and not (tmp_path / "p").exists()


def test_a_light_cuda_cu_is_compiled_again_as_written_only_for_names_of_torch_extension_h(tmp_path, monkeypatch):
    """main.cpp always gets the precompiled header (-I the prelude); cuda.cu first goes
    light. An error on a name that only torch/extension.h declares (torch::nn, py::) means
    the blanked include was needed: built again as written. Any other error is the
    candidate's own and comes back from the light build, not built twice."""
    calls: list[dict] = []
    replies: list[BuildRecord] = []

    def child(arguments, folder, cuda_home, mode):
        calls.append(arguments)
        return replies.pop(0)

    monkeypatch.setattr(inline_build, "_child_load_inline", child)
    prelude = Prelude(tmp_path, True, frozenset({"nn", "py", "Linear"}))
    source = "#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x) { torch::nn::Linear l(1, 1); return x; }\n"
    arguments = {**ARGUMENTS, "cuda_sources": source, "extra_cflags": ["-DX"]}
    nn_error = 'cuda.cu(5): error: namespace "torch" has no member "nn"\n  torch::Tensor f(torch::Tensor x) { torch::nn::Linear l(1, 1); return x; }\n'
    replies[:] = [BuildRecord("failed", log=nn_error), BuildRecord("built", library="ext.so")]
    record = inline_build._child_build(arguments, tmp_path, "", "build", prelude)
    assert record.status == "built" and record.path == "prelude" and len(calls) == 2
    assert calls[0]["cuda_sources"] == "\n" + source.splitlines()[1] + "\n" and calls[1]["cuda_sources"] == source
    assert all(call["extra_cflags"] == ["-DX", f"-I{tmp_path}"] for call in calls)

    calls.clear()
    own_error = 'cuda.cu(7): error: identifier "c" is undefined\n      out[i] = a[i] + c[i];\n'
    replies[:] = [BuildRecord("failed", log=own_error, message="load_inline: a compiler error")]
    record = inline_build._child_build(arguments, tmp_path, "", "build", prelude)
    assert record.status == "failed" and record.path == "light" and len(calls) == 1

    # An error in a header (a template that wanted a declaration the blanked include
    # brought) or a failure without any compiler error: built again as written.
    header_error = "/opt/torch/include/ATen/core/TensorBody.h(42): error: incomplete type is not allowed\n          detected during instantiation at line 9 of cuda.cu\n"
    for log in (header_error, "ninja: build stopped: subcommand failed."):
        calls.clear()
        replies[:] = [BuildRecord("failed", log=log), BuildRecord("built", library="ext.so")]
        assert inline_build._child_build(arguments, tmp_path, "", "build", prelude).path == "prelude" and len(calls) == 2

    calls.clear()
    replies[:] = [BuildRecord("built", library="ext.so")]
    assert inline_build._child_build(arguments, tmp_path, "", "build", None).path == "plain"
    assert calls == [arguments]  # without a prelude: torch's load_inline as it is

    calls.clear()
    replies[:] = [BuildRecord("built", library="ext.so")]
    no_pch = Prelude(tmp_path, False, frozenset())
    assert inline_build._child_build({**arguments, "cuda_sources": "int y;"}, tmp_path, "", "build", no_pch).path == "plain"


def test_the_builds_note_says_when_the_prelude_made_it():
    light = inline.InlineExtension("ext", ("k",), "built", 70.0, False, path="light")
    plain = inline.InlineExtension("ext", ("k",), "built", 170.0, True, path="plain")
    assert "with kz's prelude (cuda.cu without torch/extension.h) in 70.0 s" in inline.describe([light], FAKE_TOOLS)
    note = inline.describe([plain], FAKE_TOOLS)
    assert "prelude" not in note and note.endswith("in 170.0 s (cached)")


def test_a_prelude_folder_is_read_only_when_its_record_says_built(tmp_path):
    import json

    folder = tmp_path / "prelude"
    assert inline_build.read_prelude(folder) is None and inline_build.read_prelude(None) is None
    (folder / "torch").mkdir(parents=True)
    (folder / inline_build.PRELUDE_NAMES).write_text(json.dumps(["nn", "py", 3]))
    (folder / inline_build.PRELUDE_RECORD).write_text(json.dumps({"status": "failed", "message": "no gcc"}))
    assert inline_build.read_prelude(folder) is None
    (folder / inline_build.PRELUDE_RECORD).write_text(json.dumps({"status": "built", "pch": True}))
    prelude = inline_build.read_prelude(folder)
    assert prelude.names == {"nn", "py"} and not prelude.pch  # the precompiled header is missing
    (folder / "torch" / "extension.h").write_text("#pragma once\n")
    (folder / "torch" / "extension.h.gch").write_bytes(b"gch")
    assert inline_build.read_prelude(folder).pch


@pytest.mark.slow
def test_kz_check_and_eval_on_a_cpu_compile_cuda_inline_and_say_it_did_not_run(tmp_path):
    """With nvcc here: compiled (not linked: torch is a CPU build), compiler errors at the
    candidate's line, each build made once by kz's trusted builder and shared; without:
    not run, "needs nvcc". Either way nothing pretends to run."""
    problem = inline_build.toolchain("cpu").problem
    candidates = tmp_path / "c.jsonl"
    rows = [{"problem": "1_vector_add", "code": SIMPLE, "backend": "cuda_inline", "sample_id": "good"}]
    rows.append({"problem": "1_vector_add", "code": BROKEN, "backend": "cuda_inline", "sample_id": "broken"})
    candidates.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # One worker: two cold builds at once on a small CI machine could pass the build timeout.
    # A cold build of torch's headers takes a minute alone, and passed 150 s beside a loaded
    # test suite: the builds get longer than by default (eval.compile_timeout_s less 30 s).
    slow_machine = "eval.compile_timeout_s=900"
    checked = kz("check", "--candidates", str(candidates), "--json", "eval.workers=1", slow_machine, cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    good, broken = [json.loads(line) for line in checked.stdout.splitlines()]
    if problem:
        for result in (good, broken):
            assert result["status"] == "runtime_error", result
            assert "not_run: cuda_inline needs nvcc (CUDA_HOME) to build: none found" in result["message"]
    else:
        assert good["status"] == "compiled", good["message"]
        assert "load_inline: compiled kz_test_add (kernels: add_kernel) with nvcc" in good["message"]
        assert "not linked: torch" in good["message"] and "not run" in good["message"]
        assert broken["status"] == "compile_error", broken["message"]
        error = next(f for f in broken["findings"] if f["check"] == "compile_error")
        expected = next(number for number, line in enumerate(BROKEN.splitlines(), start=1) if "c[i]" in line)
        assert error["line"] == expected and 'identifier "c" is undefined' in error["message"]
    folder = tmp_path / "good"
    folder.mkdir()
    (folder / "1_vector_add.py").write_text(SIMPLE)
    evaluated = kz("eval", "--candidates", str(folder), "--backend", "cuda_inline", "--device", "cpu", "--json", f"run.root={tmp_path}", "eval.workers=1", slow_machine, cwd=tmp_path)
    assert evaluated.returncode == 0, evaluated.stderr
    [result] = [json.loads(line) for line in (tmp_path / "eval-good" / "results.jsonl").read_text().splitlines()]
    assert result["verdict"] == "runtime_error"
    assert "not run" in result["message"] or "not_run" in result["message"]
    if problem:
        assert "cuda_inline needs nvcc (CUDA_HOME) to build: none found" in result["message"]
    else:
        assert "not run: backend 'cuda_inline' needs a GPU" in result["message"]
        # Not built again: kz check's build was made by kz's trusted builder (never by a
        # candidate's process) and shared under the key of its sources, flags and
        # toolchain (kz_core/evaluate/builds.py); kz eval found it.
        assert "(cached)" in result["message"]
        shared = list((tmp_path / "cache" / "builds" / "cuda_inline").iterdir())
        extensions = [folder for folder in shared if (folder / "kz-build.json").is_file()]
        preludes = [folder for folder in shared if (folder / inline_build.PRELUDE_RECORD).is_file()]
        assert len(extensions) == 2 and len(preludes) == 1 and len(shared) == 3, shared  # the good and the broken one, and their prelude
        paths = sorted(json.loads((folder / "kz-build.json").read_text())["path"] for folder in extensions)
        assert paths[0] == "light" and paths[1] in ("light", "prelude"), paths  # the good one light; the broken one too unless torch's headers declare "c"
