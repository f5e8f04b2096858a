"""The ``cuda_inline`` backend's kernels for the trusted executor.

A recorded launch of a ``load_inline`` extension (``inline_record.py``) names its kernel
by its (mangled) name and the keys of the candidate's extensions in the shared folder of
kz's trusted builds (``kz_core/evaluate/builds.py``: built by a fresh worker that ran no
candidate code, and written only by the evaluator). The executor reads each extension's
library as *data*: it takes the GPU code out of the library's ``.nv_fatbin`` section
(never loading the library, whose host code is the candidate's C++) and loads it with
``cuModuleLoadData``. Its parameters are the recorded bytes, with the executor's own tensors'
addresses put where the recording found pointers. Runs in the executor only.

Only kernels that the build's own CUDA sources declare ``__global__`` (``cuda.cu`` in its
folder, written from the ``load_inline`` call's ``cuda_sources`` by the builder) are
launched: a library's kernel instantiated there (``thrust::transform``) is not the
candidate's work.
"""

from __future__ import annotations

import ctypes
import re
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kz_core import TrustedKernels, shared_folder

from kz_backend_cuda.checks import INLINE_BACKEND
from kz_backend_cuda.inline_record import MAX_PARAMETER_BYTES, declares
from kz_backend_cuda.traces import declared_kernels

#: A fatbin's magic number (``fatbinary_section.h``).
FATBIN_MAGIC = 0xBA55ED50
_KEY = re.compile(r"^[0-9a-f]{16,64}$")


class InlineKernelError(RuntimeError):
    """A recorded launch that the executor cannot run (the message says why)."""


def elf_section(data: bytes, wanted: str) -> bytes | None:
    """The bytes of the section named ``wanted`` of a 64-bit little-endian ELF file."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise InlineKernelError("the extension's library is not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shentsize < 64 or shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
        raise InlineKernelError("the extension's library has a malformed section table")
    sections = [struct.unpack_from("<IIQQQQ", data, shoff + index * shentsize) for index in range(shnum)]
    names_offset = sections[shstrndx][4]
    for name_index, kind, _flags, _address, offset, size in sections:
        start = names_offset + name_index
        end = data.find(b"\0", start)
        if end < 0 or data[start:end].decode(errors="replace") != wanted:
            continue
        if kind == 8:  # SHT_NOBITS
            return b""
        if offset + size > len(data):
            raise InlineKernelError(f"the extension's library has a malformed {wanted} section")
        return data[offset : offset + size]
    return None


def fatbin_images(data: bytes) -> list[bytes]:
    """The fatbins (each a header and its GPU code) in a library's ``.nv_fatbin`` section."""
    section = elf_section(data, ".nv_fatbin")
    images: list[bytes] = []
    position = 0
    while section and position + 16 <= len(section):
        magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", section, position)
        if magic != FATBIN_MAGIC:
            position += 8  # alignment padding between fatbins
            continue
        end = position + header_size + fat_size
        if header_size < 16 or end > len(section):
            raise InlineKernelError("the extension's library holds a malformed fatbin")
        images.append(section[position:end])
        position = (end + 7) & ~7
    return images


def build_library(key: str) -> tuple[Path, list[str] | None]:
    """The library of the shared build ``key`` (made by kz's trusted builder) and the
    ``__global__`` functions its CUDA sources declare (``cuda.cu``, which torch wrote into
    the build's folder from the ``load_inline`` call's ``cuda_sources``; None without it)."""
    from kz_backend_cuda.inline_build import read_record

    if not _KEY.match(key):
        raise InlineKernelError(f"malformed build key {key[:80]!r}")
    folder = shared_folder(INLINE_BACKEND, key)
    record = read_record(folder) if folder is not None else None
    if record is None or record.status != "built":
        raise InlineKernelError(f"no finished build {key} in kz's shared builds")
    try:
        sources = (folder / "cuda.cu").read_text(errors="replace")
    except OSError:
        return Path(record.library), None
    return Path(record.library), declared_kernels(sources)


class _Driver:
    """The few driver calls the executor makes, through ctypes (torch's primary context
    is current: torch has initialised CUDA in this process)."""

    def __init__(self) -> None:
        cuda = ctypes.CDLL("libcuda.so.1")
        cuda.cuModuleLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
        cuda.cuModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p]
        cuda.cuFuncGetParamInfo.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
        cuda.cuFuncSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        cuda.cuLaunchKernel.argtypes = [ctypes.c_void_p, *([ctypes.c_uint] * 7), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        cuda.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        for function in ("cuModuleLoadData", "cuModuleGetFunction", "cuFuncGetParamInfo", "cuFuncSetAttribute", "cuLaunchKernel", "cuGetErrorName"):
            getattr(cuda, function).restype = ctypes.c_int
        self.cuda = cuda

    def check(self, status: int, what: str) -> None:
        if status != 0:
            name = ctypes.c_char_p()
            self.cuda.cuGetErrorName(status, ctypes.byref(name))
            raise InlineKernelError(f"{what} failed: {(name.value or b'CUresult %d' % status).decode()}")


class InlineKernels(TrustedKernels):
    """The kernels a ``cuda_inline`` candidate's plan launches, from kz's shared builds."""

    backend = INLINE_BACKEND

    def __init__(self, code: str = ""):
        #: What the candidate's own file declares: used only for a build whose folder has
        #: no ``cuda.cu`` (torch always writes one).
        self._code_declares = declared_kernels(code)
        self._images: dict[str, list[bytes]] = {}
        self._declared: dict[str, list[str]] = {}
        self._modules: dict[tuple[str, int], Any] = {}
        self._functions: dict[tuple[str, str], tuple[Any, list[tuple[int, int]]]] = {}
        self._driver: _Driver | None = None
        self.names: set[str] = set()

    def _started(self) -> _Driver:
        if self._driver is None:
            import torch

            torch.cuda.init()
            self._driver = _Driver()
        return self._driver

    def _images_of(self, key: str) -> list[bytes]:
        if key not in self._images:
            library, declared = build_library(key)
            images = fatbin_images(library.read_bytes())
            if not images:
                raise InlineKernelError(f"the build {key} holds no GPU code")
            self._images[key], self._declared[key] = images, self._code_declares if declared is None else declared
        return self._images[key]

    def _function(self, kernel: Mapping[str, Any]) -> tuple[Any, list[tuple[int, int]]]:
        name, builds = str(kernel.get("name", "")), str(kernel.get("builds", ""))
        if (name, builds) in self._functions:
            return self._functions[(name, builds)]
        for key in builds.split()[:8]:
            images = self._images_of(key)
            if not declares(name, self._declared[key]):
                continue  # a library's kernel (thrust, cub) instantiated in the build: not the candidate's
            driver = self._started()
            for index, image in enumerate(images):
                if (key, index) not in self._modules:
                    module = ctypes.c_void_p()
                    driver.check(driver.cuda.cuModuleLoadData(ctypes.byref(module), image), f"loading the GPU code of build {key}")
                    self._modules[(key, index)] = module
                function = ctypes.c_void_p()
                if driver.cuda.cuModuleGetFunction(ctypes.byref(function), self._modules[(key, index)], name.encode()) != 0:
                    continue
                layout: list[tuple[int, int]] = []
                while True:
                    offset, size = ctypes.c_size_t(), ctypes.c_size_t()
                    status = driver.cuda.cuFuncGetParamInfo(function, len(layout), ctypes.byref(offset), ctypes.byref(size))
                    if status != 0:
                        break
                    layout.append((offset.value, size.value))
                self._functions[(name, builds)] = (function, layout)
                self.names.add(name)
                return function, layout
        raise InlineKernelError(f"the plan launches {name[:200]}, which no build it names declares __global__ in its CUDA sources and holds")

    def launch(self, step: Mapping[str, Any], args: list[Any], options: dict[str, Any]) -> None:
        import torch

        function, layout = self._function(step["kernel"])
        block = parameter_block(args, layout)
        grid = [int(g) for g in step["grid"]] + [1] * (3 - len(step["grid"]))
        threads = options.get("block", [1, 1, 1])
        shared = options.get("shared_bytes", 0)
        if not (isinstance(threads, list) and len(threads) == 3 and all(type(t) is int and 0 < t <= 1024 for t in threads)):
            raise InlineKernelError(f"malformed block {threads!r}")
        if type(shared) is not int or not 0 <= shared < (1 << 20):
            raise InlineKernelError(f"malformed shared memory size {shared!r}")
        driver = self._driver
        assert driver is not None
        if shared > 48 * 1024:
            driver.check(driver.cuda.cuFuncSetAttribute(function, 8, shared), "allowing the kernel's shared memory")  # MAX_DYNAMIC_SHARED_SIZE_BYTES
        buffer = ctypes.create_string_buffer(bytes(block), max(len(block), 1))
        pointers = (ctypes.c_void_p * max(len(layout), 1))(*[ctypes.addressof(buffer) + offset for offset, _ in layout])
        stream = torch.cuda.current_stream().cuda_stream
        driver.check(
            driver.cuda.cuLaunchKernel(function, *grid, *threads, shared, stream, pointers if layout else None, None),
            f"launching {str(step['kernel'].get('name', ''))[:120]} with grid {grid} and block {threads}",
        )

    def precompile(self, step: Mapping[str, Any], args: list[Any], options: dict[str, Any]) -> None:
        for key in str(step["kernel"].get("builds", "")).split()[:8]:
            self._images_of(key)  # read the libraries; nothing touches the GPU

    def describe(self) -> list[str]:
        return [f"kernels from kz's builds of its load_inline sources: {', '.join(sorted(self.names))}"] if self.names else []


def parameter_block(args: list[Any], layout: list[tuple[int, int]], device_type: str = "cuda") -> bytearray:
    """A launch's parameter bytes: the recorded bytes (``args[0]``, hex) with each recorded
    pointer (``args[1]``: ``[offset, tensor, delta]``) set to the executor's tensor's
    address plus ``delta``, which must lie within that tensor's storage (a tensor on a
    ``device_type`` device)."""
    import torch

    if not (isinstance(args, list) and len(args) == 2 and isinstance(args[0], str) and isinstance(args[1], list)):
        raise InlineKernelError("malformed launch arguments")
    try:
        block = bytearray.fromhex(args[0])
    except ValueError:
        raise InlineKernelError("malformed parameter bytes") from None
    size = max((offset + width for offset, width in layout), default=0)
    if len(block) != size or size > MAX_PARAMETER_BYTES:
        raise InlineKernelError(f"the launch carries {len(block)} bytes of parameters, the kernel takes {size}")
    seen: set[int] = set()
    for patch in args[1]:
        if not (isinstance(patch, list) and len(patch) == 3 and type(patch[0]) is int and isinstance(patch[1], torch.Tensor) and type(patch[2]) is int):
            raise InlineKernelError("malformed pointer in the launch's parameters")
        offset, tensor, delta = patch
        if offset % 8 or not 0 <= offset <= size - 8 or offset in seen:
            raise InlineKernelError(f"malformed pointer offset {offset}")
        seen.add(offset)
        storage = tensor.untyped_storage()
        address = tensor.data_ptr() + delta
        if not storage.data_ptr() <= address <= storage.data_ptr() + storage.nbytes():
            raise InlineKernelError("a pointer in the launch's parameters leaves its tensor's memory")
        if tensor.device.type != device_type:
            raise InlineKernelError(f"a pointer in the launch's parameters names a tensor on {tensor.device}, not on the {device_type} device")
        struct.pack_into("<Q", block, offset, address)
    return block
