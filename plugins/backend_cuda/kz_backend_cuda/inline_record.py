"""Recording a ``cuda_inline`` candidate's kernel launches as plan data (candidate side).

A ``load_inline`` extension launches its kernels from C++ host code, which no Python
launch path sees. While a forward call is recorded (``kz_core/evaluate/recording.py``),
:class:`LaunchTracer` subscribes to CUPTI's callback API (the library torch's profiler
uses) and, for every kernel launch that is not torch's own (not inside an aten operator),
reads what the driver was asked to run: the kernel's name, grid, block, dynamic shared
memory, stream and its parameter block (its layout from ``cuFuncGetParamInfo``). Every
8-byte word of the block that points into a tensor of the call becomes a reference to
that tensor (the executor puts its own tensor's address there); the rest is kept as bytes.

The trusted executor replays such a step with the kernel taken from the extension that
kz's builder made (``kz_backend_cuda/inline_trusted.py``), never with this process's
code. So this module decides nothing: a candidate that subverts it records a plan that
does not do its work. What a plan cannot describe (host-to-device copies or memsets from
C++, ``cudaMemcpyToSymbol``, a CUDA graph or cooperative launch, a kernel its sources do
not declare, a pointer to GPU memory the call did not get from torch) raises
:class:`~kz_core.evaluate.recording.NotReplayable`; the evaluator then runs the candidate
as before, in its own process, and its result says ``unverified_execution``.

Runs only inside sandboxed candidate workers, on a GPU.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from kz_backend_cuda.checks import INLINE_BACKEND

#: CUPTI's callback domains and API sites.
_DRIVER, _RUNTIME = 1, 2
_ENTER = 0
#: Driver launches recorded (``cupti_driver_cbid.h``): cuLaunchKernel(_ptsz) and
#: cuLaunchKernelEx(_ptsz).
_LAUNCH = {307: False, 442: False, 652: True, 653: True}
#: Driver calls a plan cannot describe: cooperative launches and CUDA graph launches.
_REFUSED_DRIVER = {477: "cuLaunchCooperativeKernel", 478: "cuLaunchCooperativeKernel", 480: "cuLaunchCooperativeKernelMultiDevice", 514: "cuGraphLaunch", 515: "cuGraphLaunch"}
#: Runtime calls (by name) outside torch's operators that a plan cannot describe.
_REFUSED_RUNTIME = ("cudaMemcpy", "cudaMemset", "cudaGraphLaunch", "cudaLaunchCooperativeKernel", "cudaLaunchHostFunc", "cudaStreamBeginCapture")
#: The largest parameter block recorded (bytes); CUDA allows 32 KiB, kernels use tens.
MAX_PARAMETER_BYTES = 2048
#: Device addresses lie above this; smaller 8-byte words are never taken for pointers.
_SMALLEST_ADDRESS = 1 << 32
#: Streams a launch may use: the legacy and per-thread default streams (besides the
#: caller's current one).
_DEFAULT_STREAMS = (0, 1, 2)


class _CallbackData(ctypes.Structure):
    _fields_ = [
        ("callbackSite", ctypes.c_int),
        ("functionName", ctypes.c_char_p),
        ("functionParams", ctypes.c_void_p),
        ("functionReturnValue", ctypes.c_void_p),
        ("symbolName", ctypes.c_char_p),
        ("context", ctypes.c_void_p),
        ("contextUid", ctypes.c_uint32),
        ("correlationData", ctypes.c_void_p),
        ("correlationId", ctypes.c_uint32),
    ]


class _LaunchParams(ctypes.Structure):  # cuLaunchKernel_params
    _fields_ = [
        ("f", ctypes.c_void_p),
        ("gridDimX", ctypes.c_uint),
        ("gridDimY", ctypes.c_uint),
        ("gridDimZ", ctypes.c_uint),
        ("blockDimX", ctypes.c_uint),
        ("blockDimY", ctypes.c_uint),
        ("blockDimZ", ctypes.c_uint),
        ("sharedMemBytes", ctypes.c_uint),
        ("hStream", ctypes.c_void_p),
        ("kernelParams", ctypes.c_void_p),
        ("extra", ctypes.c_void_p),
    ]


class _LaunchConfig(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [
        ("gridDimX", ctypes.c_uint),
        ("gridDimY", ctypes.c_uint),
        ("gridDimZ", ctypes.c_uint),
        ("blockDimX", ctypes.c_uint),
        ("blockDimY", ctypes.c_uint),
        ("blockDimZ", ctypes.c_uint),
        ("sharedMemBytes", ctypes.c_uint),
        ("hStream", ctypes.c_void_p),
        ("attrs", ctypes.c_void_p),
        ("numAttrs", ctypes.c_uint),
    ]


class _LaunchExParams(ctypes.Structure):  # cuLaunchKernelEx_params
    _fields_ = [("config", ctypes.POINTER(_LaunchConfig)), ("f", ctypes.c_void_p), ("kernelParams", ctypes.c_void_p), ("extra", ctypes.c_void_p)]


_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)
_libraries: dict[str, Any] = {}


def _driver() -> Any:
    if "cuda" not in _libraries:
        cuda = ctypes.CDLL("libcuda.so.1")
        for name in ("cuFuncGetParamInfo", "cuKernelGetParamInfo"):
            function = getattr(cuda, name)
            function.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
            function.restype = ctypes.c_int
        cuda.cuPointerGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
        cuda.cuPointerGetAttribute.restype = ctypes.c_int
        _libraries["cuda"] = cuda
    return _libraries["cuda"]


def cupti_candidates() -> list[str]:
    """Where libcupti may be: already loaded in this process, NVIDIA's wheels beside torch,
    the CUDA toolkit, Triton's copy; the CUDA major version torch was built with first."""
    found: list[str] = []
    with contextlib.suppress(OSError), open("/proc/self/maps") as maps:
        found += [line.split()[-1] for line in maps if "libcupti.so" in line]
    patterns = [os.path.join(p, "nvidia", "*", "lib", "libcupti.so*") for p in sys.path if p]
    patterns += [os.path.join(p, "nvidia", "cuda_cupti", "lib", "libcupti.so*") for p in sys.path if p]
    with contextlib.suppress(Exception):
        from torch.utils.cpp_extension import CUDA_HOME

        if CUDA_HOME:
            patterns += [os.path.join(CUDA_HOME, sub, "libcupti.so*") for sub in ("lib64", "lib", "extras/CUPTI/lib64")]
    patterns += [os.path.join(p, "triton", "backends", "nvidia", "lib", "cupti*", "libcupti.so*") for p in sys.path if p]
    for pattern in patterns:
        found += sorted(glob.glob(pattern))
    try:
        import torch

        major = (torch.version.cuda or "").split(".")[0]
    except Exception:  # noqa: BLE001
        major = ""
    unique = list(dict.fromkeys(found))
    return sorted(unique, key=lambda path: 0 if major and f"libcupti.so.{major}" in path else 1)


def _cupti() -> Any:
    if "cupti" not in _libraries:
        errors = []
        for path in cupti_candidates():
            try:
                library = ctypes.CDLL(path)
                break
            except OSError as exc:
                errors.append(str(exc))
        else:
            raise OSError(f"libcupti not found ({'; '.join(errors) or 'no candidates'})")
        library.cuptiSubscribe.argtypes = [ctypes.POINTER(ctypes.c_void_p), _CALLBACK, ctypes.c_void_p]
        library.cuptiEnableCallback.argtypes = [ctypes.c_uint32, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
        library.cuptiEnableDomain.argtypes = [ctypes.c_uint32, ctypes.c_void_p, ctypes.c_int]
        library.cuptiUnsubscribe.argtypes = [ctypes.c_void_p]
        _libraries["cupti"] = library
    return _libraries["cupti"]


def parameter_layout(function: int) -> list[tuple[int, int]]:
    """``(offset, size)`` of each parameter of a kernel (a ``CUfunction`` or ``CUkernel``)."""
    cuda = _driver()
    layout: list[tuple[int, int]] = []
    query = cuda.cuFuncGetParamInfo
    while True:
        offset, size = ctypes.c_size_t(), ctypes.c_size_t()
        status = query(function, len(layout), ctypes.byref(offset), ctypes.byref(size))
        if status == 0:
            layout.append((offset.value, size.value))
            continue
        if status == 1:  # CUDA_ERROR_INVALID_VALUE: past the last parameter
            return layout
        if query is cuda.cuFuncGetParamInfo and not layout:
            query = cuda.cuKernelGetParamInfo  # a library kernel's handle, not a function's
            continue
        raise RuntimeError(f"cuFuncGetParamInfo failed with CUresult {status}")


def _device_memory(address: int) -> bool:
    """Whether ``address`` is GPU memory the driver knows (``cuPointerGetAttribute``)."""
    kind = ctypes.c_uint(0)
    return _driver().cuPointerGetAttribute(ctypes.byref(kind), 2, address) == 0  # CU_POINTER_ATTRIBUTE_MEMORY_TYPE


def declares(name: str, declared: Sequence[str]) -> bool:
    """Whether a launched kernel's (mangled) name is one of the ``__global__`` functions
    the candidate's sources declare: the plain name (``extern "C"``) or its Itanium
    encoding ``<length><name>`` in a C++ name."""
    return any(name == kernel or (name.startswith("_Z") and f"{len(kernel)}{kernel}" in name) for kernel in declared)


def encode_parameters(block: bytearray, pointer: Any, known_memory: Any = _device_memory) -> tuple[str, list[list[Any]]]:
    """A launch's parameter block as plan data: the bytes in hex, with each 8-byte word
    that points into a tensor of the call zeroed and listed as ``[offset, reference,
    delta]`` (``pointer(address)`` finds it: ``(reference, delta)`` or None).

    :raises ValueError: a word is the address of GPU memory that no tensor of the call
        holds (``known_memory`` says what is GPU memory).
    """
    patches: list[list[Any]] = []
    for offset in range(0, len(block) - 7, 8):
        value = int.from_bytes(block[offset : offset + 8], "little")
        if value < _SMALLEST_ADDRESS:
            continue
        hit = pointer(value)
        if hit is not None:
            reference, delta = hit
            patches.append([offset, {"t": list(reference)}, int(delta)])
            block[offset : offset + 8] = bytes(8)
        elif known_memory(value):
            raise ValueError(f"parameter bytes {offset}-{offset + 7} point to GPU memory that no tensor of this call holds")
    return block.hex(), patches


class LaunchTracer:
    """CUPTI callbacks around one recorded forward call (use :func:`tracing`)."""

    def __init__(self, recorder: Any, declared: Sequence[str], builds: Sequence[str]):
        self.recorder = recorder
        self.declared = tuple(declared)
        self.builds = " ".join(builds)
        self.thread = threading.get_ident()
        self.stream = 0
        self.problems: list[str] = []
        self.launches = 0
        self._callback = _CALLBACK(self._on_call)
        self._subscriber = ctypes.c_void_p()

    def __enter__(self) -> LaunchTracer:
        import torch

        self.stream = int(torch.cuda.current_stream().cuda_stream)
        cupti = _cupti()
        status = cupti.cuptiSubscribe(ctypes.byref(self._subscriber), self._callback, None)
        if status != 0:
            raise RuntimeError(f"cuptiSubscribe failed with CUptiResult {status} (another CUPTI subscriber, such as torch's profiler, in this process?)")
        try:
            for cbid in (*_LAUNCH, *_REFUSED_DRIVER):
                if cupti.cuptiEnableCallback(1, self._subscriber, _DRIVER, cbid) != 0:
                    raise RuntimeError(f"cuptiEnableCallback failed for driver callback {cbid}")
            if cupti.cuptiEnableDomain(1, self._subscriber, _RUNTIME) != 0:
                raise RuntimeError("cuptiEnableDomain failed for the runtime API")
        except BaseException:
            cupti.cuptiUnsubscribe(self._subscriber)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        _cupti().cuptiUnsubscribe(self._subscriber)

    # -- the callback (on the launching thread, with the GIL) ---------------------------

    def _on_call(self, userdata: Any, domain: int, cbid: int, data_address: int) -> None:
        try:
            data = _CallbackData.from_address(data_address)
            recorder = self.recorder
            if data.callbackSite != _ENTER or recorder.suspended or recorder.in_op:
                return  # torch's own work, or kz's
            if domain == _RUNTIME:
                name = (data.functionName or b"").decode(errors="replace")
                if name.startswith(_REFUSED_RUNTIME):
                    self.problems.append(f"its C++ code called {name}")
                return
            if cbid in _REFUSED_DRIVER:
                self.problems.append(f"its C++ code called {_REFUSED_DRIVER[cbid]}")
                return
            if cbid in _LAUNCH:
                self._launch(data, _LAUNCH[cbid])
        except BaseException as exc:  # noqa: BLE001 - never raise through the driver
            self.problems.append(f"a launch could not be recorded ({type(exc).__name__}: {exc})")

    def _launch(self, data: _CallbackData, extended: bool) -> None:
        name = (data.symbolName or b"").decode(errors="replace")
        if extended:
            params = _LaunchExParams.from_address(data.functionParams)
            config = params.config.contents
            if config.numAttrs:
                self.problems.append(f"{name} was launched with launch attributes (cuLaunchKernelEx), which a plan cannot describe")
                return
            grid = (config.gridDimX, config.gridDimY, config.gridDimZ)
            block = (config.blockDimX, config.blockDimY, config.blockDimZ)
            shared, stream, function, arguments, extra = config.sharedMemBytes, config.hStream, params.f, params.kernelParams, params.extra
        else:
            launch = _LaunchParams.from_address(data.functionParams)
            grid = (launch.gridDimX, launch.gridDimY, launch.gridDimZ)
            block = (launch.blockDimX, launch.blockDimY, launch.blockDimZ)
            shared, stream, function, arguments, extra = launch.sharedMemBytes, launch.hStream, launch.f, launch.kernelParams, launch.extra
        if not declares(name, self.declared):
            self.problems.append(f"it launched {name}, which its load_inline sources do not declare as a __global__ function")
            return
        if threading.get_ident() != self.thread:
            self.recorder.elsewhere.append(f"{name} was launched from another thread")
        elif (stream or 0) not in (*_DEFAULT_STREAMS, self.stream):
            self.recorder.elsewhere.append(f"{name} was launched on another CUDA stream than the caller's")
        layout = parameter_layout(function)
        size = max((offset + width for offset, width in layout), default=0)
        if size > MAX_PARAMETER_BYTES:
            self.problems.append(f"{name} takes {size} bytes of parameters (at most {MAX_PARAMETER_BYTES} can be recorded)")
            return
        block_bytes = bytearray(size)
        if arguments:
            for index, (offset, width) in enumerate(layout):
                value = ctypes.c_void_p.from_address(arguments + 8 * index).value
                block_bytes[offset : offset + width] = ctypes.string_at(value, width)
        elif layout:
            if not extra:
                self.problems.append(f"{name} was launched without parameters")
                return
            block_bytes[:] = _extra_buffer(extra, size)
        try:
            hexed, patches = encode_parameters(block_bytes, self.recorder.pointer)
        except ValueError as exc:
            self.problems.append(f"{name}: {exc} (memory allocated outside torch, or kept from an earlier call)")
            return
        self.launches += 1
        self.recorder.add_launch(
            INLINE_BACKEND,
            {"name": name, "builds": self.builds},
            grid,
            [hexed, patches],
            {"block": list(block), "shared_bytes": int(shared)},
        )


def _extra_buffer(extra: int, size: int) -> bytes:
    """The parameter buffer of a launch's ``extra`` list (``CU_LAUNCH_PARAM_BUFFER_POINTER``
    and ``CU_LAUNCH_PARAM_BUFFER_SIZE``, ended by ``CU_LAUNCH_PARAM_END``)."""
    pointer, length = 0, -1
    for index in range(0, 16, 2):
        key = ctypes.c_void_p.from_address(extra + 8 * index).value or 0
        value = ctypes.c_void_p.from_address(extra + 8 * (index + 1)).value or 0
        if key == 0:
            break
        if key == 1:
            pointer = value
        elif key == 2:
            length = ctypes.c_size_t.from_address(value).value
    if not pointer or length != size:
        raise ValueError(f"a launch's parameter buffer holds {length} bytes, its kernel takes {size}")
    return ctypes.string_at(pointer, size)


@contextlib.contextmanager
def tracing(recorder: Any, declared: Sequence[str], builds: Sequence[str]) -> Iterator[LaunchTracer]:
    """Trace the launches of ``recorder``'s call; raises
    :class:`~kz_core.evaluate.recording.NotReplayable` afterwards when one cannot be
    described (or CUPTI cannot trace here)."""
    from kz_core import NotReplayable

    try:
        tracer = LaunchTracer(recorder, declared, builds)
        tracer.__enter__()
    except Exception as exc:  # noqa: BLE001 - no CUPTI here: the candidate runs as before
        raise NotReplayable(f"its C++ launches cannot be traced here: {exc}") from None
    failed = False
    try:
        yield tracer
    except BaseException:
        failed = True
        raise
    finally:
        tracer.__exit__(None, None, None)
        if not failed and tracer.problems:
            raise NotReplayable(f"{tracer.problems[0]}; a plan cannot describe that")
