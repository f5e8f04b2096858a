"""cuda_inline launches recorded as plan data and replayed from kz's own build (CPU parts).

On a GPU, ``test_gpu_inline.py`` evaluates candidates end to end through CUPTI and the
executor; here: the pieces that need no GPU. The executor takes a kernel's GPU code out
of the extension library's ``.nv_fatbin`` section without loading the library (whose
host code is the candidate's); a launch's parameter bytes carry pointers as references
to the plan's tensors; only kernels the candidate's source declares ``__global__`` run.
"""

from __future__ import annotations

import shutil
import struct
import subprocess

import pytest
import torch

from kz_core.evaluate.recording import Recorder

from kz_backend_cuda.inline_record import declares, encode_parameters
from kz_backend_cuda.inline_trusted import FATBIN_MAGIC, InlineKernelError, InlineKernels, build_library, elf_section, fatbin_images, parameter_block

KERNELS = r"""
__global__ void add_kernel(const float* a, float* b, long long n) { long long i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) b[i] = a[i] + 1; }
template <typename T> __global__ void scale_kernel(T* x, T s, int n) { int i = threadIdx.x; if (i < n) x[i] *= s; }
template __global__ void scale_kernel<float>(float*, float, int);
void launch(const float* a, float* b, long long n) { add_kernel<<<1, 1>>>(a, b, n); }
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """A shared library built by nvcc from two kernels and host code (as load_inline's are)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None or shutil.which("g++") is None:
        pytest.skip("needs nvcc and g++")
    folder = tmp_path_factory.mktemp("nvcc")
    (folder / "k.cu").write_text(KERNELS)
    built = subprocess.run([nvcc, "-shared", "-Xcompiler", "-fPIC", "-arch=sm_90", "-o", str(folder / "k.so"), str(folder / "k.cu")], capture_output=True, text=True, timeout=600)
    if built.returncode != 0:
        pytest.skip(f"nvcc could not build here: {built.stderr[-300:]}")
    return (folder / "k.so").read_bytes()


def test_the_gpu_code_is_read_from_the_librarys_fatbin_section_without_loading_it(library):
    images = fatbin_images(library)
    assert images and all(struct.unpack_from("<I", image)[0] == FATBIN_MAGIC for image in images)
    # Every image is whole: its header's sizes add up to its length.
    for image in images:
        _, _, header, size = struct.unpack_from("<IHHQ", image)
        assert len(image) == header + size
    assert elf_section(library, ".no_such_section") is None


def test_a_file_that_is_not_an_elf_library_is_refused():
    with pytest.raises(InlineKernelError, match="not a 64-bit little-endian ELF"):
        fatbin_images(b"MZ" + bytes(100))
    truncated = b"\x7fELF\x02\x01" + bytes(58)
    truncated = truncated[:0x28] + struct.pack("<Q", 1 << 40) + truncated[0x30:0x3A] + struct.pack("<HHH", 64, 3, 1)
    with pytest.raises(InlineKernelError, match="malformed section table"):
        fatbin_images(truncated)


def test_only_kernels_the_source_declares_are_launched():
    declared = ["add_kernel", "scale_kernel"]
    assert declares("add_kernel", declared)  # extern "C"
    assert declares("_Z10add_kernelPKfPfx", declared)
    assert declares("_Z12scale_kernelIfEvPT_S0_i", declared)  # a template's instance
    assert not declares("_Z13my_add_kernelPf", declared)  # a longer name that ends the same
    assert not declares("_ZN2at6native29vectorized_elementwise_kernelILi4EEEviT_", declared)  # torch's
    assert not declares("add_kernel2", declared)


def test_a_launch_naming_a_kernel_its_builds_sources_do_not_declare_never_runs(library, tmp_path, monkeypatch):
    """The executor launches only kernels that the build's own CUDA sources (``cuda.cu``,
    written by kz's builder) declare ``__global__``: a library's kernel instantiated in the
    build (thrust's, cub's) is refused before any GPU is touched, and so is a build that
    kz's builder did not finish."""
    import json

    import attrs

    from kz_backend_cuda.inline_build import RECORD_NAME, BuildRecord

    key = "ab" * 20
    folder = tmp_path / "cuda_inline" / key
    folder.mkdir(parents=True)
    (folder / "ext.so").write_bytes(library)
    (folder / "cuda.cu").write_text('__global__ void add_kernel(const float* a, float* b, long long n);')
    (folder / RECORD_NAME).write_text(json.dumps(attrs.asdict(BuildRecord("built", library="ext.so"))))
    monkeypatch.setenv("KZ_SHARED_BUILDS", str(tmp_path))
    kernels = InlineKernels()
    # scale_kernel is in the library's GPU code, but the build's sources do not declare it here.
    with pytest.raises(InlineKernelError, match="no build it names declares"):
        kernels._function({"name": "_Z12scale_kernelIfEvPT_S0_i", "builds": key})
    assert build_library(key)[1] == ["add_kernel"]
    with pytest.raises(InlineKernelError, match="malformed build key"):
        build_library("../../etc")
    with pytest.raises(InlineKernelError, match="no finished build"):
        build_library("cd" * 20)


def test_pointers_in_the_parameter_bytes_become_references_to_the_calls_tensors():
    base = 0x7F00_0000_0000
    known = {base: (["in", 0], 0), base + 64: (["in", 0], 64), base + 4096: (["val", 2], 0)}
    block = bytearray(struct.pack("<QQQqi4x", base, base + 4096, base + 64, 1000, 7))
    hexed, patches = encode_parameters(block, known.get, known_memory=lambda address: False)
    assert patches == [[0, {"t": ["in", 0]}, 0], [8, {"t": ["val", 2]}, 0], [16, {"t": ["in", 0]}, 64]]
    # The addresses are zeroed (two recordings of the same call compare equal); numbers stay.
    assert bytes.fromhex(hexed) == bytes(24) + struct.pack("<qi4x", 1000, 7)
    # An address of GPU memory that no tensor of the call holds cannot be replayed.
    with pytest.raises(ValueError, match="no tensor of this call holds"):
        encode_parameters(bytearray(struct.pack("<Q", base + (1 << 20))), known.get, known_memory=lambda address: True)


def test_the_executor_puts_its_own_tensors_addresses_where_the_pointers_were():
    a, out = torch.zeros(16), torch.zeros(4)
    layout = [(0, 8), (8, 8), (16, 8)]
    block = parameter_block([bytes(16).hex() + struct.pack("<q", 16).hex(), [[0, a, 8], [8, out, 0]]], layout, device_type="cpu")
    assert struct.unpack_from("<QQq", block) == (a.data_ptr() + 8, out.data_ptr(), 16)
    with pytest.raises(InlineKernelError, match="leaves its tensor's memory"):
        parameter_block([bytes(24).hex(), [[0, out, 4096]]], layout, device_type="cpu")
    with pytest.raises(InlineKernelError, match="malformed pointer offset"):
        parameter_block([bytes(24).hex(), [[4, out, 0]]], layout, device_type="cpu")
    with pytest.raises(InlineKernelError, match="the kernel takes 24"):
        parameter_block([bytes(16).hex(), []], layout, device_type="cpu")
    with pytest.raises(InlineKernelError, match="not on the cuda device"):
        parameter_block([bytes(24).hex(), [[0, out, 0]]], layout)


def test_the_recorder_finds_the_tensor_a_raw_address_points_into():
    x = torch.arange(32, dtype=torch.float32)
    recorder = Recorder([x, 3], 1 << 20)
    view = x[8:]
    assert recorder.pointer(x.data_ptr()) == (["in", 0], 0)
    assert recorder.pointer(view.data_ptr() + 4) == (["in", 0], 36)
    assert recorder.pointer(x.data_ptr() + 10**9) is None and recorder.pointer(0) is None
    weight = torch.ones(4)
    assert recorder.ref(weight) == {"t": ["const", 0]}  # a tensor handed to C++ is made known
    assert recorder.pointer(weight.data_ptr() + 8) == (["const", 0], 8)
