"""Programmatic problems and their kernels: a KernelBench-format torch module and, for the
same computation, a Triton candidate and a CUDA (NVRTC) candidate, from a seed.

Families (``FAMILIES``):

- ``elementwise``: a chain of one to three elementwise operations of one tensor;
- ``binary``: an operation of two tensors of one shape, then a chain;
- ``broadcast``: an operation of a matrix and a row vector broadcast over its rows, then a
  chain;
- ``row_reduction``: a sum, mean, maximum or minimum over the last dimension of a chain's
  result, with or without the reduced dimension kept;
- ``softmax``: softmax, log-softmax or logsumexp over the last dimension of a scaled or
  mapped input.

Sizes (non-powers of two, one to three dimensions), constants and the chains are drawn
from the seed; the same seed always gives the same three sources. The kernels are written
the way the repository's examples are: masked loads and stores, 64-bit offsets, a loop
over a row longer than one block. This module writes source text; it runs nothing.
"""

from __future__ import annotations

import random
import textwrap

import attrs

from kz_core.synth import ops
from kz_core.synth.ops import Binary, Unary

FAMILIES = ("elementwise", "binary", "broadcast", "row_reduction", "softmax")


@attrs.frozen
class Synthetic:
    """One synthetic problem and its kernels.

    :ivar family: one of :data:`FAMILIES`.
    :ivar template: the family and what was chained, e.g. ``elementwise:relu>exp``.
    :ivar apis: the API-catalog names the torch module uses (a Proposer prompt's APIs).
    :ivar problem: the KernelBench-format torch module.
    :ivar triton: the Triton candidate.
    :ivar cuda: the CUDA (NVRTC, kz CUDA API) candidate.
    """

    family: str
    template: str
    apis: tuple[str, ...]
    problem: str
    triton: str
    cuda: str


# -- drawing a chain ------------------------------------------------------------------------


def _number(rng: random.Random, low: float, high: float) -> str:
    return f"{rng.uniform(low, high):.3f}"


def _chain(rng: random.Random, domain: str, length: int) -> list[tuple[Unary, dict[str, str]]]:
    """Up to ``length`` unary operations defined on ``domain`` and on each other's output."""
    chain = []
    for _ in range(length):
        choices = [op for op in ops.UNARY if ops.allowed(op, domain) and not (chain and chain[-1][0].name == op.name)]
        op = rng.choice(choices)
        constants = {"a": _number(rng, 0.05, 0.5) if op.name == "leaky_relu" else _number(rng, 0.5, 2.0), "b": _number(rng, -0.5, 0.5)}
        chain.append((op, constants))
        domain = op.yields if op.name != "affine" else ("bounded" if domain in ("bounded", "nonneg", "positive") else "any")
    return chain


def _steps(chain: list[tuple[Unary, dict[str, str]]], start: str, language: str) -> tuple[list[str], str]:
    """Assignments computing the chain from variable ``start``: ``(lines, last variable)``."""
    lines, current = [], start
    for index, (op, constants) in enumerate(chain):
        expression = getattr(op, language).format(x=current, **constants)
        name = f"v{index}"
        lines.append(f"float {name} = {expression};" if language == "cuda" else f"{name} = {expression}")
        current = name
    return lines, current


def _sizes(rng: random.Random, dims: int, total: tuple[int, int], max_rows: int = 1 << 30) -> list[tuple[str, int]]:
    """Named size constants: leading dimensions from a few small sizes, the last one any
    length from 33 to 2100 (rarely a power of two), their product within ``total`` and the
    product of the leading ones (the rows a row-wise kernel gives a program each) at most
    ``max_rows`` (Triton's interpreter on a CPU runs programs one by one)."""
    names = {1: ["n"], 2: ["rows", "cols"], 3: ["batch_size", "rows", "cols"]}[dims]
    while True:
        values = [rng.choice([3, 5, 7, 12, 16, 24, 33]) for _ in range(dims - 1)] + [rng.randint(33, 2100)]
        if dims == 1:
            values = [rng.randint(300, total[1])]
        product = rows = 1
        for value in values:
            product *= value
        for value in values[:-1]:
            rows *= value
        if total[0] <= product <= total[1] and rows <= max_rows:
            return list(zip(names, values))


def _inputs_line(name: str, sizes: str, domain: str) -> str:
    if domain == "positive":
        return f"    {name} = torch.rand({sizes}) + 0.1"
    return f"    {name} = torch.randn({sizes})"


def _problem(doc: str, args: list[str], body: list[str], sizes: list[tuple[str, int]], inputs: list[str]) -> str:
    constants = "\n".join(f"{name} = {value}" for name, value in sizes)
    forward = "\n".join(f"        {line}" for line in body)
    return f'''import torch
import torch.nn as nn


class Model(nn.Module):
    """{doc}"""

    def __init__(self):
        super().__init__()

    def forward(self, {", ".join(args)}):
{forward}


{constants}


def get_inputs():
{chr(10).join(inputs)}
    return [{", ".join(args)}]


def get_init_inputs():
    return []
'''


def _describe(chain: list[tuple[Unary, dict[str, str]]]) -> str:
    return ">".join(op.name for op, _ in chain) or "identity"


# -- elementwise families -------------------------------------------------------------------


def _elementwise(rng: random.Random, family: str) -> Synthetic:
    dims = rng.choice([1, 2, 3]) if family != "broadcast" else rng.choice([2, 3])
    sizes = _sizes(rng, dims, (256, 40_000))
    shape = ", ".join(name for name, _ in sizes)
    two = family in ("binary", "broadcast")
    binary: Binary | None = rng.choice(ops.BINARY) if two else None
    domain = rng.choice(["any", "positive"]) if not two else "any"
    chain = _chain(rng, domain if not two else ops.combine("any", "any", binary.name), rng.randint(1 if not two else 0, 3 if not two else 2))
    if not chain and not two:
        chain = _chain(rng, domain, 1)
    args = ["x", "y"] if two else ["x"]
    y_shape = sizes[-1][0] if family == "broadcast" else shape
    inputs = [_inputs_line("x", shape, domain)] + ([_inputs_line("y", y_shape, "any")] if two else [])
    # torch
    body, start = [], "x"
    if binary is not None:
        body.append(f"z = {binary.torch.format(x='x', y='y')}")
        start = "z"
    torch_lines, last = _steps(chain, start, "torch")
    body += torch_lines + [f"return {last}"]
    what = (f"{binary.name} of x and {'a row vector y broadcast over the rows' if family == 'broadcast' else 'y'}, then " if binary else "") + (
        ", then ".join(op.name for op, _ in chain) or "nothing more"
    )
    problem = _problem(f"Elementwise: {what}.", args, body, sizes, inputs)
    template = f"{family}:{binary.name + '|' if binary else ''}{_describe(chain)}"
    apis = tuple(dict.fromkeys(api for api in ([binary.api] if binary else []) + [op.api for op, _ in chain] if api))
    return Synthetic(family, template, apis, problem, _triton_elementwise(binary, chain, family), _cuda_elementwise(binary, chain, family))


def _triton_elementwise(binary: Binary | None, chain: list[tuple[Unary, dict[str, str]]], family: str) -> str:
    loads = ["x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)"]
    if binary is not None:
        index = "offsets % n_cols" if family == "broadcast" else "offsets"
        loads.append(f"y = tl.load(y_ptr + {index}, mask=mask).to(tl.float32)")
        loads.append(f"z = {binary.triton.format(x='x', y='y')}")
    lines, last = _steps(chain, "z" if binary else "x", "triton")
    body = textwrap.indent("\n".join(loads + lines), "    ")
    params = "x_ptr, y_ptr, out_ptr, n_elements, n_cols" if binary else "x_ptr, out_ptr, n_elements"
    args = "x, y, out, n, y.numel()" if binary else "x, out, n"
    signature = "x, y" if binary else "x"
    contig = "x, y = x.contiguous(), y.contiguous()" if binary else "x = x.contiguous()"
    return f'''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def fused_kernel({params}, BLOCK_SIZE: tl.constexpr):
    # One program computes BLOCK_SIZE consecutive elements; the last one is masked.
    pid = tl.program_id(axis=0)
    offsets = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
{body}
    tl.store(out_ptr + offsets, {last}.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, {signature}):
        {contig}
        out = torch.empty_like(x)
        n = x.numel()
        if n == 0:
            return out
        # 1024 elements per program: few programs under the interpreter, enough work on a GPU.
        grid = (triton.cdiv(n, 1024),)
        fused_kernel[grid]({args}, BLOCK_SIZE=1024)
        return out
'''


def _cuda_elementwise(binary: Binary | None, chain: list[tuple[Unary, dict[str, str]]], family: str) -> str:
    loads = ["float x = xs[i];"]
    if binary is not None:
        loads.append(f"float y = ys[{'i % n_cols' if family == 'broadcast' else 'i'}];")
        loads.append(f"float z = {binary.cuda.format(x='x', y='y')};")
    lines, last = _steps(chain, "z" if binary else "x", "cuda")
    body = textwrap.indent("\n".join(loads + lines + [f"out[i] = {last};"]), "        ")
    params = "const float* __restrict__ xs, const float* __restrict__ ys, float* __restrict__ out, long long n, long long n_cols" if binary else "const float* __restrict__ xs, float* __restrict__ out, long long n"
    args = "x, y, out, n, y.numel()" if binary else "x, out, n"
    signature = "x, y" if binary else "x"
    contig = "x, y = x.contiguous(), y.contiguous()" if binary else "x = x.contiguous()"
    return f'''import torch
import torch.nn as nn

from kz_backend_cuda import load_cuda

KERNELS = load_cuda(r"""
extern "C" __global__ void fused_kernel({params}) {{
    // One thread per element; the grid covers n, so the last block checks the bound.
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {{
{body}
    }}
}}
""")

THREADS = 256  # 8 warps per block: enough to hide memory latency for a streaming kernel


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, {signature}):
        {contig}
        out = torch.empty_like(x)
        n = x.numel()
        if n == 0:
            return out
        KERNELS.fused_kernel[(n + THREADS - 1) // THREADS, THREADS]({args})
        return out
'''


# -- row reductions -------------------------------------------------------------------------


def _row_reduction(rng: random.Random) -> Synthetic:
    dims = rng.choice([2, 3])
    sizes = _sizes(rng, dims, (256, 40_000), max_rows=64)
    shape = ", ".join(name for name, _ in sizes)
    reduction = rng.choice(ops.REDUCTIONS)
    domain = rng.choice(["any", "positive"])
    chain = _chain(rng, domain, rng.randint(0, 2))
    keep = rng.choice([True, False])
    torch_lines, last = _steps(chain, "x", "torch")
    body = torch_lines + [f"return {reduction.torch.format(x=last, keep=keep)}"]
    what = (", ".join(op.name for op, _ in chain) + ", then " if chain else "") + f"{reduction.name} over the last dimension"
    problem = _problem(f"Row reduction: {what}{' (kept)' if keep else ''}.", ["x"], body, sizes, [_inputs_line("x", shape, domain)])
    apis = tuple(dict.fromkeys([op.api for op, _ in chain] + [reduction.api]))
    template = f"row_reduction:{_describe(chain)}>{reduction.name}{':keepdim' if keep else ''}"
    return Synthetic("row_reduction", template, apis, problem, _triton_reduction(reduction, chain, keep), _cuda_reduction(reduction, chain, keep))


def _out_shape(keep: bool) -> str:
    return "(*x.shape[:-1], 1)" if keep else "x.shape[:-1]"


def _triton_reduction(reduction: ops.Reduction, chain: list[tuple[Unary, dict[str, str]]], keep: bool) -> str:
    lines, last = _steps(chain, "x", "triton")
    mapped = textwrap.indent("\n".join(lines), "        ")
    folded = reduction.triton_fold.format(acc="acc", r=reduction.triton_block.format(v="v"))
    finish = reduction.triton_finish.format(acc="acc", n="n_cols")
    return f'''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_reduce_kernel(x_ptr, out_ptr, n_cols, row_stride, BLOCK_SIZE: tl.constexpr):
    # One program per row: it walks the row in BLOCK_SIZE chunks and folds each chunk into acc.
    row = tl.program_id(axis=0).to(tl.int64)
    base = x_ptr + row * row_stride
    acc = tl.full((), {reduction.start}, tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(base + cols, mask=mask, other=0.0).to(tl.float32)
{mapped}
        # Lanes past the end of the row hold the reduction's identity.
        v = tl.where(mask, {last}, {reduction.masked})
        acc = {folded}
    tl.store(out_ptr + row, ({finish}).to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        n_cols = x.shape[-1]
        rows = x.contiguous().view(-1, n_cols)  # (n_rows, n_cols)
        out = torch.empty(rows.shape[0], dtype=x.dtype, device=x.device)
        # A block of up to 1024 columns per step: a whole row at once when it fits.
        block = min(triton.next_power_of_2(n_cols), 1024)
        row_reduce_kernel[(rows.shape[0],)](rows, out, n_cols, rows.stride(0), BLOCK_SIZE=block)
        return out.view({_out_shape(keep)})
'''


def _cuda_reduction(reduction: ops.Reduction, chain: list[tuple[Unary, dict[str, str]]], keep: bool) -> str:
    lines, last = _steps(chain, "x", "cuda")
    mapped = textwrap.indent("\n".join(lines), "        ")
    fold = reduction.cuda_fold.format(acc="acc", v=last)
    combine = reduction.cuda_fold.format(acc="partial[threadIdx.x]", v="partial[threadIdx.x + s]")
    finish = reduction.cuda_finish.format(acc="partial[0]", n="n_cols")
    return f'''import torch
import torch.nn as nn

from kz_backend_cuda import load_cuda

KERNELS = load_cuda(r"""
#define THREADS 256
extern "C" __global__ void row_reduce_kernel(const float* __restrict__ xs, float* __restrict__ out, long long n_cols) {{
    // One block per row: each thread folds a strided part of the row, then the block
    // combines the threads' partial results in shared memory.
    __shared__ float partial[THREADS];
    const float* row = xs + (long long)blockIdx.x * n_cols;
    float acc = {reduction.cuda_start};
    for (long long c = threadIdx.x; c < n_cols; c += THREADS) {{
        float x = row[c];
{mapped}
        acc = {fold};
    }}
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {{
        if (threadIdx.x < s) {{
            partial[threadIdx.x] = {combine};
        }}
        __syncthreads();
    }}
    if (threadIdx.x == 0) {{
        out[blockIdx.x] = {finish};
    }}
}}
""")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        n_cols = x.shape[-1]
        rows = x.contiguous().view(-1, n_cols)  # (n_rows, n_cols)
        out = torch.empty(rows.shape[0], dtype=x.dtype, device=x.device)
        KERNELS.row_reduce_kernel[rows.shape[0], 256](rows, out, n_cols)
        return out.view({_out_shape(keep)})
'''


# -- softmax-like ---------------------------------------------------------------------------


def _softmax(rng: random.Random) -> Synthetic:
    dims = rng.choice([2, 3])
    sizes = _sizes(rng, dims, (256, 40_000), max_rows=64)
    shape = ", ".join(name for name, _ in sizes)
    kind = rng.choice(ops.SOFTMAX_LIKE)
    chain = _chain(rng, "any", rng.randint(0, 1))
    scale = _number(rng, 0.25, 3.0)
    torch_lines, last = _steps(chain, "x", "torch")
    call = {"softmax": "torch.softmax({v}, dim=-1)", "log_softmax": "torch.log_softmax({v}, dim=-1)", "logsumexp": "torch.logsumexp({v}, dim=-1)"}[kind]
    body = torch_lines + [f"s = {last} * {scale}", f"return {call.format(v='s')}"]
    what = (", ".join(op.name for op, _ in chain) + ", then " if chain else "") + f"scaled by {scale}, then {kind} over the last dimension"
    problem = _problem(f"Row-wise: {what}.", ["x"], body, sizes, [_inputs_line("x", shape, "any")])
    apis = tuple(dict.fromkeys([op.api for op, _ in chain] + ["torch.mul", ops.SOFTMAX_API[kind]]))
    template = f"softmax:{_describe(chain)}>scale>{kind}"
    return Synthetic("softmax", template, apis, problem, _triton_softmax(kind, chain, scale), _cuda_softmax(kind, chain, scale))


def _triton_softmax(kind: str, chain: list[tuple[Unary, dict[str, str]]], scale: str) -> str:
    lines, last = _steps(chain, "x", "triton")
    mapped = textwrap.indent("\n".join(lines + [f"v = {last} * {scale}"]), "        ")
    write = {
        "softmax": "y = tl.exp(v - m) / s",
        "log_softmax": "y = v - m - tl.log(s)",
    }
    if kind == "logsumexp":
        second = "    tl.store(out_ptr + row, (m + tl.log(s)).to(out_ptr.dtype.element_ty))"
    else:
        second = f'''    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(in_row + cols, mask=mask, other=0.0).to(tl.float32)
{mapped}
        {write[kind]}
        tl.store(out_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)'''
    out_row = "" if kind == "logsumexp" else "    out_row = out_ptr + row * n_cols\n"
    launch_out = "out = torch.empty(rows.shape[0], dtype=x.dtype, device=x.device)" if kind == "logsumexp" else "out = torch.empty_like(rows)"
    result = "out.view(x.shape[:-1])" if kind == "logsumexp" else "out.view(x.shape)"
    return f'''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_softmax_kernel(in_ptr, out_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    # One program per row. Pass 1: the running maximum m and the sum s of exp(v - m), the
    # sum rescaled whenever the maximum grows ("online softmax"). Pass 2 writes the result.
    row = tl.program_id(axis=0).to(tl.int64)
    in_row = in_ptr + row * n_cols
{out_row}    m = tl.full((), float("-inf"), tl.float32)
    s = tl.full((), 0.0, tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(in_row + cols, mask=mask, other=0.0).to(tl.float32)
{mapped}
        v = tl.where(mask, v, float("-inf"))
        m_new = tl.maximum(m, tl.max(v, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(v - m_new), axis=0)
        m = m_new
{second}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        n_cols = x.shape[-1]
        rows = x.contiguous().view(-1, n_cols)  # (n_rows, n_cols)
        {launch_out}
        block = min(triton.next_power_of_2(n_cols), 1024)
        row_softmax_kernel[(rows.shape[0],)](rows, out, n_cols, BLOCK_SIZE=block)
        return {result}
'''


def _cuda_softmax(kind: str, chain: list[tuple[Unary, dict[str, str]]], scale: str) -> str:
    lines, last = _steps(chain, "x", "cuda")
    mapped = "\n".join(lines + [f"float v = {last} * {scale}f;"])
    value = textwrap.indent(mapped, "        ")
    if kind == "logsumexp":
        write = "    if (threadIdx.x == 0) {\n        out[blockIdx.x] = m + logf(total);\n    }"
    else:
        expression = "expf(v - m) / total" if kind == "softmax" else "v - m - logf(total)"
        write = f'''    for (long long c = threadIdx.x; c < n_cols; c += THREADS) {{
        float x = row[c];
{value}
        out[(long long)blockIdx.x * n_cols + c] = {expression};
    }}'''
    launch_out = "out = torch.empty(rows.shape[0], dtype=x.dtype, device=x.device)" if kind == "logsumexp" else "out = torch.empty_like(rows)"
    result = "out.view(x.shape[:-1])" if kind == "logsumexp" else "out.view(x.shape)"
    return f'''import torch
import torch.nn as nn

from kz_backend_cuda import load_cuda

KERNELS = load_cuda(r"""
#define THREADS 256
extern "C" __global__ void row_softmax_kernel(const float* __restrict__ xs, float* __restrict__ out, long long n_cols) {{
    // One block per row: the row's maximum and then the sum of exp(v - max), each folded by
    // the threads over strided columns and combined in shared memory.
    __shared__ float partial[THREADS];
    const float* row = xs + (long long)blockIdx.x * n_cols;
    float local = __int_as_float(0xff800000);  // -infinity
    for (long long c = threadIdx.x; c < n_cols; c += THREADS) {{
        float x = row[c];
{value}
        local = fmaxf(local, v);
    }}
    partial[threadIdx.x] = local;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {{
        if (threadIdx.x < s) partial[threadIdx.x] = fmaxf(partial[threadIdx.x], partial[threadIdx.x + s]);
        __syncthreads();
    }}
    float m = partial[0];
    __syncthreads();
    local = 0.0f;
    for (long long c = threadIdx.x; c < n_cols; c += THREADS) {{
        float x = row[c];
{value}
        local += expf(v - m);
    }}
    partial[threadIdx.x] = local;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {{
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }}
    float total = partial[0];
{write}
}}
""")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        n_cols = x.shape[-1]
        rows = x.contiguous().view(-1, n_cols)  # (n_rows, n_cols)
        {launch_out}
        KERNELS.row_softmax_kernel[rows.shape[0], 256](rows, out, n_cols)
        return {result}
'''


def synthesize(family: str, seed: int) -> Synthetic:
    """The problem and kernels of ``family`` for ``seed`` (deterministic)."""
    rng = random.Random(f"{family}:{seed}")
    if family in ("elementwise", "binary", "broadcast"):
        return _elementwise(rng, family)
    if family == "row_reduction":
        return _row_reduction(rng)
    if family == "softmax":
        return _softmax(rng)
    raise ValueError(f"unknown family {family!r}: use one of {', '.join(FAMILIES)}")
