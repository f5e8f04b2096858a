"""The kz CUDA API without a GPU: signatures, argument checks, compile-only behaviour."""

from __future__ import annotations

import pytest
import torch

from kz_backend_cuda import api
from kz_backend_cuda.signature import SignatureError, kernel_signatures

SOURCE = r"""
// extern "C" __global__ void commented_out(int x)
extern "C" __global__ void __launch_bounds__(256) scale(const float* __restrict__ x, float * out, float factor, long long n, unsigned char flag, void* anything) {}
extern "C" __global__ void empty() {}
__global__ void not_extern_c(float* a) {}
"""


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KZ_CACHE_DIR", str(tmp_path / "cache"))


def test_signatures_are_read_from_extern_c_kernels():
    signatures = kernel_signatures(SOURCE)
    assert list(signatures) == ["scale", "empty"]
    params = signatures["scale"]
    assert [(p.name, p.ctype, p.pointer) for p in params] == [
        ("x", "float*", True), ("out", "float*", True), ("factor", "float", False),
        ("n", "long long", False), ("flag", "unsigned char", False), ("anything", "void*", True),
    ]
    assert params[0].dtypes == ("float32",) and params[5].dtypes == ("*",)
    assert (params[3].ctypes_name, params[3].bits, params[3].kind) == ("c_int64", 64, "int")


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ('extern "C" __global__ void f(struct Params p) {}', "cannot pass by value"),
        ('extern "C" __global__ void f(float3* p) {}', "does not map to a torch dtype"),
    ],
)
def test_unsupported_parameters_are_refused(source, message):
    with pytest.raises(SignatureError, match=message):
        kernel_signatures(source)


def test_load_cuda_needs_an_extern_c_kernel():
    with pytest.raises(SignatureError, match='no extern "C" __global__ kernel'):
        api.load_cuda("__global__ void k(float* a) {}")


def test_kernels_by_attribute_and_name_and_clear_misses():
    module = api.load_cuda(SOURCE, arch="sm_90")
    assert module.scale is module["scale"]
    assert "scale(float* x" in repr(module.scale)
    with pytest.raises(AttributeError, match="this source defines scale, empty"):
        module.missing


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((torch.ones(4),), "takes 6 arguments"),
        ((1, torch.ones(4), 1.0, 4, 1, torch.ones(1)), r"argument 1 \(float\* x\) of scale needs a CUDA tensor, got int"),
        ((torch.ones(4, dtype=torch.float16), torch.ones(4), 1.0, 4, 1, torch.ones(1)), "needs a tensor of dtype float32, got float16"),
        ((torch.ones(4, 4).t(), torch.ones(4), 1.0, 4, 1, torch.ones(1)), "non-contiguous"),
        ((torch.ones(4), torch.ones(4), 1.0, 4, 1, torch.ones(1)), "needs a CUDA tensor, got one on cpu"),
    ],
)
def test_launch_arguments_are_checked_against_the_signature(args, message):
    module = api.load_cuda(SOURCE, arch="sm_90")
    with pytest.raises(api.KernelArgumentError, match=message):
        module.scale[1, 256](*args)


def test_scalar_arguments_are_checked():
    module = api.load_cuda(SOURCE, arch="sm_90")
    kernel = module.scale
    # Scalars are checked before anything touches a device, so a CPU can check them.
    kernel.parameters = tuple(p for p in kernel.parameters if not p.pointer)
    with pytest.raises(api.KernelArgumentError, match="needs a number"):
        kernel.marshal(("x", 1, 1))
    with pytest.raises(api.KernelArgumentError, match="does not fit 8 bits"):
        kernel.marshal((1.0, 1, 300))
    with pytest.raises(api.KernelArgumentError, match="needs an integer"):
        kernel.marshal((1.0, 2.5, 1))
    values, types, device = kernel.marshal((2, 2**40, 255))
    assert values == (2.0, 2**40, 255) and device is None
    assert [t.__name__ for t in types] == ["c_float", "c_long", "c_ubyte"]


def test_launch_configuration_is_checked():
    module = api.load_cuda(SOURCE, arch="sm_90")
    with pytest.raises(api.KernelArgumentError, match="kernel\\[grid, block\\]"):
        module.empty[1]()
    with pytest.raises(api.KernelArgumentError, match="block must be 1 to 3 positive integers"):
        module.empty[1, (0,)]()


@pytest.mark.skipif(torch.cuda.is_available(), reason="without a GPU only")
def test_launching_without_a_gpu_says_so():
    module = api.load_cuda(SOURCE, arch="sm_90")
    with pytest.raises(api.CudaUnavailableError, match="compiled with NVRTC, but there is no GPU"):
        module.empty[1, 1]()
