"""``libdevice`` under Triton's CPU interpreter.

Kernels reach CUDA's math library through ``triton.language.extra.libdevice`` (or
``tl.extra.cuda.libdevice``): ``libdevice.tanh`` for a GELU, ``libdevice.erf``,
``libdevice.pow``. On a GPU the compiler maps those calls to the library; Triton's
interpreter (``TRITON_INTERPRET=1``, how kz runs Triton on a machine without a GPU) does
not, and the call returns ``None`` (Triton 3.6 to 3.9), so an honest kernel failed on a
CPU with ``unsupported operand type(s) ... 'NoneType'``. :func:`install` gives the
interpreter the math functions of the library (elementwise, computed by torch on the
CPU in the argument's precision, as the library computes them in its own): the same
calls that compile on a GPU run under the interpreter, and so do the conversions between
floats and integers (``llrint``, ``float2int_rz``, ``int2float_rn``). Bit-level and
integer helpers (``popc``, ``byte_perm``) are left as they are.

:func:`install` also installs :mod:`kz_backend_triton.interpreted_bfloat16` (the
interpreter computes on bfloat16's bit patterns as integers, ``tl.dot`` included) and
:mod:`kz_backend_triton.interpreted_semantics` (``a and b`` of mask tensors, a dtype's
``value``).

Installed in the processes that run kernels under the interpreter (candidate workers and
executors); trusted code: it reads the interpreter's arrays and computes with torch.
"""

from __future__ import annotations

import math
from typing import Any, Callable

_installed = False


def _functions() -> dict[str, tuple[Callable[..., Any], str]]:
    """``name -> (torch function of the arguments, result kind)``; kinds: ``same`` (the
    first floating argument's dtype), or the name of the result's dtype (``int32``: CUDA's
    predicates return an int; the conversions their target)."""
    import torch

    def rsqrt(x):
        return torch.rsqrt(x)

    def exp10(x):
        return torch.pow(torch.tensor(10.0, dtype=x.dtype), x)

    def rcbrt(x):
        return 1.0 / (torch.sign(x) * torch.abs(x).pow(1.0 / 3.0))

    def cbrt(x):
        return torch.sign(x) * torch.abs(x).pow(1.0 / 3.0)

    def round_away(x):
        return torch.where(x >= 0, torch.floor(x + 0.5), torch.ceil(x - 0.5))

    def sinpi(x):
        return torch.sin(math.pi * x)

    def cospi(x):
        return torch.cos(math.pi * x)

    def rhypot(x, y):
        return 1.0 / torch.hypot(x, y)

    def norm3d(x, y, z):
        return torch.sqrt(x * x + y * y + z * z)

    def norm4d(x, y, z, w):
        return torch.sqrt(x * x + y * y + z * z + w * w)

    def fdim(x, y):
        return torch.clamp(x - y, min=0)

    def normcdf(x):
        return 0.5 * torch.erfc(-x / math.sqrt(2.0))

    def normcdfinv(x):
        return math.sqrt(2.0) * torch.erfinv(2.0 * x - 1.0)

    def erfcinv(x):
        return torch.erfinv(1.0 - x)

    def erfcx(x):
        return torch.special.erfcx(x)

    def saturatef(x):
        return torch.clamp(x, 0.0, 1.0)

    def remainder(x, y):  # IEEE remainder: x - n*y, n the integer nearest x/y (ties to even)
        return x - torch.round(x / y) * y

    def ldexp(x, e):
        return torch.ldexp(x, e.to(torch.int32) if not e.is_floating_point() else e)

    def fma(x, y, z):
        return x * y + z

    def divide(x, y):
        return x / y

    def add(x, y):
        return x + y

    def sub(x, y):
        return x - y

    def mul(x, y):
        return x * y

    def reciprocal(x):
        return 1.0 / x

    def hadd(x, y):  # integer halving add, rounded down
        return (x + y) >> 1

    def rhadd(x, y):
        return (x + y + 1) >> 1

    same: dict[str, Callable[..., Any]] = {
        "abs": torch.abs, "fabs": torch.abs, "floor": torch.floor, "ceil": torch.ceil, "trunc": torch.trunc,
        "round": round_away, "rint": torch.round, "nearbyint": torch.round,
        "exp": torch.exp, "exp2": torch.exp2, "exp10": exp10, "expm1": torch.expm1,
        "log": torch.log, "log2": torch.log2, "log10": torch.log10, "log1p": torch.log1p, "logb": lambda x: torch.floor(torch.log2(torch.abs(x))),
        "sqrt": torch.sqrt, "rsqrt": rsqrt, "cbrt": cbrt, "rcbrt": rcbrt,
        "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "sinpi": sinpi, "cospi": cospi,
        "asin": torch.asin, "acos": torch.acos, "atan": torch.atan, "atan2": torch.atan2,
        "sinh": torch.sinh, "cosh": torch.cosh, "tanh": torch.tanh, "asinh": torch.asinh, "acosh": torch.acosh, "atanh": torch.atanh,
        "erf": torch.erf, "erfc": torch.erfc, "erfinv": torch.erfinv, "erfcinv": erfcinv, "erfcx": erfcx,
        "normcdf": normcdf, "normcdfinv": normcdfinv, "lgamma": torch.lgamma, "tgamma": lambda x: torch.exp(torch.lgamma(x)) * torch.where(
            (x < 0) & (torch.remainder(torch.floor(x), 2) == 1), -1.0, 1.0),
        "j0": torch.special.bessel_j0, "j1": torch.special.bessel_j1, "y0": torch.special.bessel_y0, "y1": torch.special.bessel_y1,
        "cyl_bessel_i0": torch.special.i0, "cyl_bessel_i1": torch.special.i1,
        "pow": torch.pow, "fmax": torch.fmax, "fmin": torch.fmin, "hypot": torch.hypot, "rhypot": rhypot,
        "norm3d": norm3d, "rnorm3d": lambda x, y, z: 1.0 / norm3d(x, y, z), "norm4d": norm4d, "rnorm4d": lambda x, y, z, w: 1.0 / norm4d(x, y, z, w),
        "copysign": torch.copysign, "fmod": torch.fmod, "remainder": remainder, "fdim": fdim, "nextafter": torch.nextafter,
        "ldexp": ldexp, "scalbn": ldexp, "fma": fma, "saturatef": saturatef,
        "fast_expf": torch.exp, "fast_logf": torch.log, "fast_log2f": torch.log2, "fast_log10f": torch.log10, "fast_exp10f": exp10,
        "fast_sinf": torch.sin, "fast_cosf": torch.cos, "fast_tanf": torch.tan, "fast_powf": torch.pow, "fast_dividef": divide,
        "hadd": hadd, "rhadd": rhadd,
    }
    for mode in ("rn", "rz", "rd", "ru"):  # rounding modes: round to nearest here (within any tolerance kz uses)
        same.update({f"div_{mode}": divide, f"add_{mode}": add, f"sub_{mode}": sub, f"mul_{mode}": mul, f"fma_{mode}": fma,
                     f"rcp_{mode}": reciprocal, f"sqrt_{mode}": torch.sqrt})
    same["rsqrt_rn"] = rsqrt
    predicates = {
        "isnan": torch.isnan, "isinf": torch.isinf, "finitef": torch.isfinite, "isfinited": torch.isfinite, "signbit": torch.signbit,
    }
    table = {name: (function, "same") for name, function in same.items()}
    table.update({name: (function, "int32") for name, function in predicates.items()})
    # Conversions between floats and integers (bitsandbytes' quantisers round with
    # `llrint`; over-rejection probe 22): to an integer, in the rounding mode the name
    # gives, exactly; to a float, rounded to nearest whatever the mode.
    to_integer = {"rn": torch.round, "rz": torch.trunc, "rd": torch.floor, "ru": torch.ceil}
    integers = {"int": "int32", "uint": "uint32", "ll": "int64", "ull": "uint64"}
    for mode, rounding in to_integer.items():
        for source in ("float", "double"):
            for target, kind in integers.items():
                table[f"{source}2{target}_{mode}"] = (rounding, kind)
        for source in integers:
            table[f"{source}2float_{mode}"] = (lambda x: x, "float32")
            table[f"{source}2double_{mode}"] = (lambda x: x, "float64")
        table[f"double2float_{mode}"] = (lambda x: x, "float32")
    table.update(llrint=(torch.round, "int64"), llround=(round_away, "int64"))
    return table


def _wrap(name: str, function: Callable[..., Any], kind: str) -> Callable[..., Any]:
    def call(*args: Any, _semantic: Any = None, **kwargs: Any) -> Any:
        import numpy as np
        import torch
        import triton.language as tl
        from triton.runtime.interpreter import TensorHandle, _get_np_dtype

        if kwargs:
            raise TypeError(f"libdevice.{name} takes positional arguments only")
        tensors = [a for a in args if isinstance(a, tl.tensor)]
        if not tensors:
            raise TypeError(f"libdevice.{name} needs a tensor argument under the interpreter")
        reference = next((t for t in tensors if t.dtype.is_floating()), tensors[0])

        def as_torch(array: Any) -> Any:  # half precision is computed in float32 and rounded back
            values = torch.from_numpy(np.ascontiguousarray(array))
            return values.float() if values.dtype == torch.float16 else values

        floating = as_torch(reference.handle.data).dtype if reference.dtype.is_floating() else None
        arrays = []
        for value in args:
            value = value.value if isinstance(value, tl.constexpr) else value
            arrays.append(as_torch(value.handle.data) if isinstance(value, tl.tensor) else torch.tensor(value, dtype=floating))
        with torch.no_grad():
            result = function(*arrays)
        out_dtype = reference.dtype if kind == "same" else getattr(tl, kind)
        data = result.numpy().astype(_get_np_dtype(out_dtype))
        shape = [int(s) for s in data.shape]
        block = any(t.type.is_block() for t in tensors)
        return tl.tensor(TensorHandle(data, out_dtype), tl.block_type(out_dtype, shape) if block else out_dtype)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"libdevice.{name} under Triton's interpreter (kz_backend_triton.interpreted_libdevice)."
    return call


def install() -> None:
    """Give ``triton.language.extra.libdevice`` and ``triton.language.extra.cuda.libdevice``
    their math functions under the interpreter (idempotent; call only where
    ``TRITON_INTERPRET=1``)."""
    global _installed
    if _installed:
        return
    import importlib

    modules = []
    for module_name in ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice"):
        try:
            modules.append(importlib.import_module(module_name))
        except ImportError:  # pragma: no cover - a Triton without one of them
            continue
    for name, (function, kind) in _functions().items():
        for module in modules:
            if hasattr(module, name):
                wrapped = _wrap(name, function, kind)
                wrapped.__module__ = module.__name__  # kernels may use what triton.language offers
                setattr(module, name, wrapped)
    from kz_backend_triton import interpreted_bfloat16, interpreted_conversions, interpreted_reduce, interpreted_semantics

    interpreted_bfloat16.install()  # bfloat16 arithmetic, which the interpreter does on bit patterns
    interpreted_conversions.install()  # float conversions as a GPU rounds them (after the bfloat16 patch)
    interpreted_reduce.install()  # reductions and scans with a kernel's own combine, on whole blocks
    interpreted_semantics.install()  # `a and b` of masks, a dtype's `value`
    _installed = True
