"""Proof of launch for cuda_inline: declared kernels, and their names in profiler traces."""

from __future__ import annotations

from kz_backend_cuda.traces import MARKER_KERNEL, count_declared_launches, declared_kernels, kernel_name_parts


def test_declared_kernels_reads_every_spelling_of_a_global_function():
    source = r"""
    #include <torch/extension.h>
    // __global__ void commented_out(float* x) {}
    /* __global__ void also_commented(float* x) {} */
    __global__ void add_kernel(const float* a, const float* b, float* out, int n) {}
    extern "C" __global__ void c_kernel(float* x) {}
    template <typename scalar_t>
    __global__ void templated_kernel(const scalar_t* __restrict__ x, scalar_t* y) {}
    __global__ void __launch_bounds__(256, 2) bounded_kernel(float* x) {}
    __global__ static void static_kernel(float* x) {}
    __global__ void add_kernel(const float* a, const float* b, float* out, int n);
    __device__ float helper(float x) { return x; }
    torch::Tensor host_function(torch::Tensor x) { return x; }
    """
    assert declared_kernels(source) == ["add_kernel", "c_kernel", "templated_kernel", "bounded_kernel", "static_kernel"]


def test_declared_kernels_of_a_source_without_kernels_is_empty():
    assert declared_kernels("__device__ float f(float x) { return x; }\nint g(int y) { return y; }") == []


def test_kernel_name_parts_reads_demangled_and_mangled_trace_names():
    assert kernel_name_parts("add_kernel") == ["add_kernel"]
    assert kernel_name_parts("add_kernel(float const*, float const*, float*, long long)") == ["add_kernel"]
    assert kernel_name_parts("void templated_kernel<float>(float const*, float*)") == ["templated_kernel"]
    assert kernel_name_parts("void ns::inner::scale<float, 4>(float*, int)") == ["ns", "inner", "scale"]
    assert kernel_name_parts("(anonymous namespace)::hidden(float*)") == ["hidden"]
    assert kernel_name_parts(
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >"
        "(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)"
    ) == ["at", "native", "vectorized_elementwise_kernel"]
    assert kernel_name_parts("_Z10add_kernelPKfS0_Pfx") == ["add_kernel"]
    assert kernel_name_parts("_ZN2ns6kernelIfEEvPT_") == ["ns", "kernel"]
    assert kernel_name_parts("_ZN12_GLOBAL__N_16hiddenEPf") == ["hidden"]
    assert kernel_name_parts("_ZL13static_kernelPf") == ["static_kernel"]


def test_count_declared_launches_counts_only_the_candidates_kernels():
    trace = [
        MARKER_KERNEL,
        "add_kernel(float const*, float const*, float*, long long)",
        "add_kernel(float const*, float const*, float*, long long)",
        "void scale<float>(float*, float, int)",
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
        "void cub::CUB_300000_SM_900::detail::for_each::static_kernel<float>(float*)",
    ]
    launches = count_declared_launches(trace, ["add_kernel", "scale", "unused"])
    assert launches == {"add_kernel": 2, "scale": 1}
    assert sum(count_declared_launches(trace, ["missing"]).values()) == 0


def test_torchs_own_kernels_never_count_even_under_a_declared_name():
    # A candidate that declares a kernel named like torch's and lets torch do the work.
    trace = ["void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int)"]
    assert sum(count_declared_launches(trace, ["vectorized_elementwise_kernel"]).values()) == 0
    assert sum(count_declared_launches(["c10::cuda::impl::fill(float*)", "torch::k(float*)"], ["fill", "k"]).values()) == 0


def test_the_stream_marker_is_never_a_candidate_launch():
    assert sum(count_declared_launches([MARKER_KERNEL], [MARKER_KERNEL]).values()) == 0
