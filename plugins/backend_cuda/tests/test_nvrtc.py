"""NVRTC compilation on the CPU: cubins, the disk cache, compiler errors with lines."""

from __future__ import annotations

import pytest

from kz_backend_cuda.nvrtc import CudaCompileError, compile_source

ADD = r"""
extern "C" __global__ void add(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
"""


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KZ_CACHE_DIR", str(tmp_path / "cache"))


def test_compiles_to_a_cubin_and_caches_it(tmp_path):
    first = compile_source(ADD, arch="sm_90")
    assert first.cubin[:4] == b"\x7fELF" and not first.cached and first.arch == "sm_90"
    again = compile_source(ADD, arch="sm_90")
    assert again.cached and again.cubin == first.cubin
    assert list((tmp_path / "cache" / "nvrtc").glob("*.cubin"))
    # Another architecture or other options are other cache entries.
    assert not compile_source(ADD, arch="sm_80").cached
    assert not compile_source(ADD, {"use_fast_math": True}, arch="sm_90").cached


def test_compile_errors_carry_the_log_and_the_line():
    broken = 'extern "C" __global__ void f(float* a) {\n    int x = ;\n    g(a);\n}\n'
    with pytest.raises(CudaCompileError) as caught:
        compile_source(broken, arch="sm_90")
    error = caught.value
    assert str(error) == "NVRTC: 2 errors"
    assert error.line == 2
    assert "kernel.cu(2): error: expected an expression" in error.log
    assert "kernel.cu(3): error" in error.log and 'identifier "g" is undefined' in error.log
    assert error.source == broken


def test_unknown_options_are_a_compile_error():
    with pytest.raises(CudaCompileError, match="unknown NVRTC option"):
        compile_source(ADD, {"no_such_option": True}, arch="sm_90")


def test_default_architecture_without_a_gpu(monkeypatch):
    import torch

    from kz_backend_cuda.nvrtc import current_arch

    if torch.cuda.is_available():
        pytest.skip("a GPU decides the architecture here")
    monkeypatch.setenv("KZ_CUDA_ARCH", "sm_80")
    assert current_arch() == "sm_80"
    monkeypatch.delenv("KZ_CUDA_ARCH")
    assert current_arch() == "sm_90"


def test_options_that_touch_files_are_refused(tmp_path):
    from kz_backend_cuda.nvrtc import CudaCompileError, compile_source

    header = tmp_path / "h.cuh"
    header.write_text("#define SECRET 1\n")
    source = 'extern "C" __global__ void k(float* x) { x[0] = SECRET; }'
    with pytest.raises(CudaCompileError, match="pre_include read or write files"):
        compile_source(source, {"pre_include": str(header)}, arch="sm_90", use_cache=False)


def test_the_executors_compile_error_keeps_nvrtcs_log():
    from kz_backend_cuda.trusted import NvrtcKernels
    from kz_core.backend import KernelCompileError

    source = 'extern "C" __global__ void k(float* x) { x[0] = undeclared_name; }'
    with pytest.raises(KernelCompileError, match="undeclared_name"):
        NvrtcKernels()._module({"source": source, "options": "{}", "arch": "sm_90"})
