"""Kernel signatures: the parameter types of ``extern "C" __global__`` functions.

Read from the CUDA source with a small parser (kernels launched through the kz API are
``extern "C"``, so their parameter lists are plain C: pointers and scalars). Each parameter
gets a marshalling rule: pointers take CUDA tensors of a matching dtype, scalars take
Python numbers that fit. Nothing here compiles or launches anything.
"""

from __future__ import annotations

import re

import attrs

#: Scalar C types: (ctypes name, bits, signed or float kind). Kinds: "int", "uint", "float".
SCALARS: dict[str, tuple[str, int, str]] = {
    "bool": ("c_bool", 8, "bool"),
    "char": ("c_int8", 8, "int"),
    "signed char": ("c_int8", 8, "int"),
    "int8_t": ("c_int8", 8, "int"),
    "unsigned char": ("c_uint8", 8, "uint"),
    "uint8_t": ("c_uint8", 8, "uint"),
    "short": ("c_int16", 16, "int"),
    "int16_t": ("c_int16", 16, "int"),
    "unsigned short": ("c_uint16", 16, "uint"),
    "uint16_t": ("c_uint16", 16, "uint"),
    "int": ("c_int32", 32, "int"),
    "signed": ("c_int32", 32, "int"),
    "int32_t": ("c_int32", 32, "int"),
    "unsigned": ("c_uint32", 32, "uint"),
    "unsigned int": ("c_uint32", 32, "uint"),
    "uint32_t": ("c_uint32", 32, "uint"),
    "long": ("c_int64", 64, "int"),
    "long long": ("c_int64", 64, "int"),
    "long int": ("c_int64", 64, "int"),
    "long long int": ("c_int64", 64, "int"),
    "int64_t": ("c_int64", 64, "int"),
    "ptrdiff_t": ("c_int64", 64, "int"),
    "unsigned long": ("c_uint64", 64, "uint"),
    "unsigned long long": ("c_uint64", 64, "uint"),
    "uint64_t": ("c_uint64", 64, "uint"),
    "size_t": ("c_uint64", 64, "uint"),
    "float": ("c_float", 32, "float"),
    "double": ("c_double", 64, "float"),
}

#: Pointee C types and the torch dtype names a pointer to them accepts ("*": any).
POINTEES: dict[str, tuple[str, ...]] = {
    "void": ("*",),
    "float": ("float32",),
    "double": ("float64",),
    "half": ("float16",),
    "__half": ("float16",),
    "__nv_bfloat16": ("bfloat16",),
    "nv_bfloat16": ("bfloat16",),
    "bool": ("bool",),
    "char": ("int8", "uint8", "bool"),
    "signed char": ("int8",),
    "int8_t": ("int8",),
    "unsigned char": ("uint8", "bool"),
    "uint8_t": ("uint8", "bool"),
    "short": ("int16",),
    "int16_t": ("int16",),
    "int": ("int32",),
    "int32_t": ("int32",),
    "unsigned": ("int32",),
    "unsigned int": ("int32",),
    "uint32_t": ("int32",),
    "long": ("int64",),
    "long long": ("int64",),
    "int64_t": ("int64",),
    "unsigned long long": ("int64",),
    "uint64_t": ("int64",),
    "size_t": ("int64",),
}

_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|struct)\b")
_KERNEL = re.compile(
    r'extern\s+"C"\s+__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s+)?void\s+'
    r"(?:__launch_bounds__\s*\([^)]*\)\s+)?([A-Za-z_]\w*)\s*\(([^)]*)\)",
    re.DOTALL,
)


class SignatureError(ValueError):
    """A kernel parameter the kz API cannot marshal, or a kernel it cannot find."""


@attrs.frozen
class Parameter:
    """One kernel parameter.

    :ivar name: the parameter's name in the source.
    :ivar ctype: the C type as written, without qualifiers (``float*``, ``int``).
    :ivar pointer: whether it is a pointer (takes a CUDA tensor).
    :ivar dtypes: for pointers, the torch dtype names it accepts (``*``: any).
    :ivar ctypes_name: for scalars, the ctypes type used to pass it.
    :ivar bits: for scalars, the width.
    :ivar kind: for scalars, ``int``, ``uint``, ``float`` or ``bool``.
    """

    name: str
    ctype: str
    pointer: bool
    dtypes: tuple[str, ...] = ()
    ctypes_name: str = "c_void_p"
    bits: int = 64
    kind: str = "pointer"


def _strip_comments(source: str) -> str:
    source = re.sub(r"/\*.*?\*/", " ", source, flags=re.DOTALL)
    return re.sub(r"//[^\n]*", " ", source)


def parse_parameter(text: str, kernel: str) -> Parameter:
    """One ``type name`` declaration from a kernel's parameter list."""
    cleaned = " ".join(_QUALIFIERS.sub(" ", text).split())
    match = re.fullmatch(r"(.+?)\s*(\*+)?\s*([A-Za-z_]\w*)", cleaned.replace(" *", "*").replace("* ", "*"))
    if match is None:
        raise SignatureError(f"kernel {kernel}: cannot read the parameter {text.strip()!r}")
    base, stars, name = match.group(1).strip(), match.group(2) or "", match.group(3)
    if base.endswith("*"):
        stars, base = stars + "*" * (len(base) - len(base.rstrip("*"))), base.rstrip("*").strip()
    if stars:
        if len(stars) > 1:
            return Parameter(name=name, ctype=f"{base}{stars}", pointer=True, dtypes=("*",))
        if base not in POINTEES:
            raise SignatureError(f"kernel {kernel}: parameter {name} has pointer type {base}*, which the kz API does not map to a torch dtype; use void* or one of {', '.join(sorted(POINTEES))}")
        return Parameter(name=name, ctype=f"{base}*", pointer=True, dtypes=POINTEES[base])
    if base not in SCALARS:
        raise SignatureError(f"kernel {kernel}: parameter {name} has type {base}, which the kz API cannot pass by value; use pointers and scalars ({', '.join(sorted(SCALARS))})")
    ctypes_name, bits, kind = SCALARS[base]
    return Parameter(name=name, ctype=base, pointer=False, ctypes_name=ctypes_name, bits=bits, kind=kind)


def kernel_signatures(source: str) -> dict[str, tuple[Parameter, ...]]:
    """Every ``extern "C" __global__`` kernel in ``source`` with its parameters, in order."""
    signatures: dict[str, tuple[Parameter, ...]] = {}
    for match in _KERNEL.finditer(_strip_comments(source)):
        name, params = match.group(1), match.group(2).strip()
        parts = [] if params in ("", "void") else [p for p in params.split(",")]
        signatures[name] = tuple(parse_parameter(part, name) for part in parts)
    return signatures
