"""The kz CUDA API that candidates call: compile CUDA C++ with NVRTC, launch with tensors.

.. code-block:: python

    from kz_backend_cuda import load_cuda

    kernels = load_cuda(r'''
    extern "C" __global__ void add(const float* a, const float* b, float* out, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) out[i] = a[i] + b[i];
    }
    ''')
    kernels.add[(n + 255) // 256, 256](a, b, out, n)        # grid, block
    kernels.add[grid, block, shared_bytes](a, b, out, n)    # with dynamic shared memory

Every ``extern "C" __global__`` function becomes a :class:`CudaKernel`. Arguments are
checked against the kernel's C signature: a pointer takes a contiguous CUDA tensor of a
matching dtype (``float*``: float32, ``void*``: any), a scalar takes a Python number that
fits its type. Kernels launch on torch's current stream of the tensors' device. Every
launch is counted (:data:`LAUNCHES`), which is how the evaluator proves that the
candidate's own kernels ran.

Without a GPU, :func:`load_cuda` still compiles (NVRTC runs on the CPU) and reports
compiler errors; launching raises :class:`CudaUnavailableError`.
"""

from __future__ import annotations

import ctypes
from typing import Any

from kz_core import LaunchCounter

from kz_backend_cuda.nvrtc import CompiledSource, CudaCompileError, compile_source
from kz_backend_cuda.signature import Parameter, SignatureError, kernel_signatures

__all__ = ["CudaCompileError", "CudaKernel", "CudaModule", "CudaUnavailableError", "KernelArgumentError", "LAUNCHES", "load_cuda"]


class CudaUnavailableError(RuntimeError):
    """The kernels compiled, but there is no GPU here to run them on."""


class KernelArgumentError(TypeError):
    """A launch argument does not match the kernel's C signature."""


LAUNCHES = LaunchCounter()


def _check(result: Any, what: str) -> Any:
    """Unwrap a ``cuda.bindings`` ``(error, *values)`` result, raising on an error."""
    from cuda.bindings import driver

    error, *values = result if isinstance(result, tuple) else (result,)
    if error != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(error)
        raise RuntimeError(f"{what} failed: {name.decode() if isinstance(name, bytes) else name}")
    return values[0] if len(values) == 1 else values


def _dims(value: Any, what: str) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, int) else tuple(value)
    if not 1 <= len(dims) <= 3 or any(not isinstance(d, int) or isinstance(d, bool) or d < 1 for d in dims):
        raise KernelArgumentError(f"{what} must be 1 to 3 positive integers, got {value!r}")
    return (*dims, *(1,) * (3 - len(dims)))  # type: ignore[return-value]


class CudaKernel:
    """One ``extern "C" __global__`` kernel: ``kernel[grid, block(, shared_bytes)](*args)``."""

    def __init__(self, module: CudaModule, name: str, parameters: tuple[Parameter, ...]):
        self.module = module
        self.name = name
        self.parameters = parameters
        self._functions: dict[int, Any] = {}

    def __repr__(self) -> str:
        params = ", ".join(f"{p.ctype} {p.name}" for p in self.parameters)
        return f"<CudaKernel {self.name}({params})>"

    def __getitem__(self, config: tuple) -> Any:
        if not isinstance(config, tuple) or len(config) not in (2, 3):
            raise KernelArgumentError(f"launch {self.name} as kernel[grid, block](...) or kernel[grid, block, shared_bytes](...), got [{config!r}]")
        grid, block, *shared = config
        return lambda *args: self.launch(*args, grid=grid, block=block, shared_bytes=shared[0] if shared else 0)

    def marshal(self, args: tuple[Any, ...]) -> tuple[tuple[Any, ...], tuple[Any, ...], int | None]:
        """The argument values and ctypes for ``cuLaunchKernel``, and the tensors' device."""
        import torch

        if len(args) != len(self.parameters):
            raise KernelArgumentError(f"{self.name} takes {len(self.parameters)} arguments ({', '.join(p.name for p in self.parameters)}), got {len(args)}")
        values: list[Any] = []
        types: list[Any] = []
        device: int | None = None
        for position, (param, value) in enumerate(zip(self.parameters, args), start=1):
            where = f"argument {position} ({param.ctype} {param.name}) of {self.name}"
            if param.pointer:
                if not isinstance(value, torch.Tensor):
                    raise KernelArgumentError(f"{where} needs a CUDA tensor, got {type(value).__name__}")
                dtype = str(value.dtype).removeprefix("torch.")
                if "*" not in param.dtypes and dtype not in param.dtypes:
                    raise KernelArgumentError(f"{where} needs a tensor of dtype {' or '.join(param.dtypes)}, got {dtype}")
                if not value.is_contiguous():
                    raise KernelArgumentError(f"{where} got a non-contiguous tensor: pass tensor.contiguous()")
                if not value.is_cuda:
                    raise KernelArgumentError(f"{where} needs a CUDA tensor, got one on {value.device}")
                if device is not None and value.device.index != device:
                    raise KernelArgumentError(f"{where} is on cuda:{value.device.index}, other arguments on cuda:{device}")
                device = value.device.index
                values.append(value.data_ptr())
                types.append(ctypes.c_void_p)
                continue
            if param.kind == "float":
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise KernelArgumentError(f"{where} needs a number, got {type(value).__name__}")
                values.append(float(value))
            elif param.kind == "bool":
                if not isinstance(value, bool):
                    raise KernelArgumentError(f"{where} needs a bool, got {type(value).__name__}")
                values.append(value)
            else:
                if isinstance(value, bool) or not isinstance(value, int):
                    raise KernelArgumentError(f"{where} needs an integer, got {type(value).__name__}")
                low, high = (0, 2**param.bits - 1) if param.kind == "uint" else (-(2 ** (param.bits - 1)), 2 ** (param.bits - 1) - 1)
                if not low <= value <= high:
                    raise KernelArgumentError(f"{where} does not fit {param.bits} bits: {value}")
                values.append(value)
            types.append(getattr(ctypes, param.ctypes_name))
        return tuple(values), tuple(types), device

    def launch(self, *args: Any, grid: Any, block: Any, shared_bytes: int = 0) -> None:
        """Launch on torch's current stream of the tensors' device (checked, then counted)."""
        grid3, block3 = _dims(grid, "grid"), _dims(block, "block")
        if not isinstance(shared_bytes, int) or shared_bytes < 0:
            raise KernelArgumentError(f"shared_bytes must be a non-negative integer, got {shared_bytes!r}")
        from kz_core import record_kernel

        with record_kernel("cuda", self.module.identity(self.name), grid3, args, {"block": list(block3), "shared_bytes": shared_bytes}):
            self._launch(args, grid3, block3, shared_bytes)

    def _launch(self, args: tuple[Any, ...], grid3: tuple[int, int, int], block3: tuple[int, int, int], shared_bytes: int) -> None:
        import torch

        values, types, device = self.marshal(args)
        if not torch.cuda.is_available():
            raise CudaUnavailableError(f"{self.name} compiled with NVRTC, but there is no GPU here to run it on")
        from cuda.bindings import driver

        device = torch.cuda.current_device() if device is None else device
        function = self._function(device)
        if shared_bytes > 48 * 1024:
            _check(
                driver.cuFuncSetAttribute(function, driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared_bytes),
                f"allowing {shared_bytes} bytes of shared memory for {self.name}",
            )
        stream = driver.CUstream(torch.cuda.current_stream(device).cuda_stream)
        _check(
            driver.cuLaunchKernel(function, *grid3, *block3, shared_bytes, stream, (values, types), 0),
            f"launching {self.name} with grid {grid3} and block {block3}",
        )
        LAUNCHES.record(self.name)

    def _function(self, device: int) -> Any:
        if device not in self._functions:
            from cuda.bindings import driver
            import torch

            with torch.cuda.device(device):
                torch.cuda.init()
                module = self.module.loaded(device)
                self._functions[device] = _check(driver.cuModuleGetFunction(module, self.name.encode()), f"finding kernel {self.name}")
        return self._functions[device]


class CudaModule:
    """The kernels of one CUDA source: ``module.add`` or ``module["add"]``."""

    def __init__(self, source: str, compiled: CompiledSource, signatures: dict[str, tuple[Parameter, ...]], options: dict[str, Any] | None = None, arch: str | None = None):
        self.source = source
        self.options = dict(options or {})
        self.arch = arch
        self.compiled = compiled
        self._options_json: str | None = None
        self.kernels = {name: CudaKernel(self, name, params) for name, params in signatures.items()}
        self._modules: dict[int, Any] = {}

    def identity(self, kernel: str) -> dict[str, Any]:
        """What a recorded launch of ``kernel`` names: the source and options that build it
        (the trusted executor compiles them again itself). Built once per module."""
        if self._options_json is None:
            import json

            self._options_json = json.dumps(self.options, sort_keys=True, default=str)
        return {"name": kernel, "source": self.source, "options": self._options_json, "arch": self.arch or ""}

    def __getitem__(self, name: str) -> CudaKernel:
        try:
            return self.kernels[name]
        except KeyError:
            raise KeyError(f"no extern \"C\" __global__ kernel named {name!r}; this source defines {', '.join(self.kernels) or 'none'}") from None

    def __getattr__(self, name: str) -> CudaKernel:
        if name.startswith("_") or name in ("source", "compiled", "kernels", "options", "arch"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(str(exc)) from None

    def loaded(self, device: int) -> Any:
        """The cubin loaded into the current context of ``device`` (torch's primary context)."""
        if device not in self._modules:
            from cuda.bindings import driver

            self._modules[device] = _check(driver.cuModuleLoadData(self.compiled.cubin), "loading the cubin")
        return self._modules[device]


def load_cuda(source: str, *, options: dict[str, Any] | None = None, arch: str | None = None) -> CudaModule:
    """Compile ``source`` with NVRTC and return its ``extern "C" __global__`` kernels.

    :param options: ``cuda.core.ProgramOptions`` fields, e.g. ``{"use_fast_math": True}``.
    :param arch: ``sm_XY``; default: the current GPU's, else ``$KZ_CUDA_ARCH`` or sm_90.
    :raises CudaCompileError: with NVRTC's log when the source does not compile.
    :raises SignatureError: when a kernel has a parameter the API cannot pass.
    """
    signatures = kernel_signatures(source)
    if not signatures:
        raise SignatureError('the source defines no extern "C" __global__ kernel; declare kernels as extern "C" __global__ void name(...)')
    compiled = compile_source(source, options, arch)
    module = CudaModule(source, compiled, signatures, options, arch)
    LOADED.append(module)
    return module


#: Every module loaded in this process, newest last (the evaluator reports them).
LOADED: list[CudaModule] = []
