"""The trusted side's checks of large GPU tensors, each one pass of a Triton kernel.

A reference worker compares a candidate's outputs with the reference's, and executors and
reference workers fingerprint every input, for calls of up to gigabytes. Written as chains
of torch operations (``kz_core.evaluate.correctness._chunk_errors`` and
``kz_core.evaluate.execution.device_sums``), the comparison of one 6.4 GB float32 output
took 198 ms on an H200 and a fingerprint 59 ms, against 3 ms for the reference's own call
(``benchmarks/check_costs.py``): a KernelBench activation's candidate spent seconds of the
GPU on its checks. The kernels here compute the same values in one read of the tensors:
the same sums, wrapping the same way, and the same float64 arithmetic as the torch
operations, block by block; torch then reduces the blocks' partial results.

Imported only where a tensor to check is on a CUDA device (Triton comes with torch's CUDA
builds); callers fall back to the torch operations when this module cannot be imported.
Under ``TRITON_INTERPRET=1`` the kernels run on a CPU (how the tests compare them with the
torch operations).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

#: Elements per program. Divides ``kz_core.evaluate.correctness.CHUNK_ELEMENTS``, so that a
#: chunk's counts are sums of whole programs' partial counts.
BLOCK = 4096

#: dtypes the comparison kernel loads and widens to float64 itself.
COMPARED_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _jit(fn):
    """Specialised on no argument's value or alignment: one compiled kernel serves every
    size and every view (each specialisation would be compiled again, in every process)."""
    names = fn.__code__.co_varnames[: fn.__code__.co_argcount]
    values = [name for name in ("n", "key") if name in names]
    pointers = [name for name in ("words", "want", "got") if name in names]
    try:
        return triton.jit(fn, do_not_specialize=values, do_not_specialize_on_alignment=pointers)
    except TypeError:  # a Triton without do_not_specialize_on_alignment
        return triton.jit(fn, do_not_specialize=values)


def _sums(words, n, key, plain, weighted, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    word = tl.load(words + offsets, mask=mask, other=0).to(tl.int64)
    # ``kz_core.evaluate.execution.position_weights``, step by step in wrapping int64.
    mixed = (offsets + key.to(tl.int64)) * 0x5851F42D4C957F2D
    mixed = (mixed ^ (mixed >> 29)) * 0x14057B7EF767814F
    position_hash = (mixed ^ (mixed >> 32)) & 0x7FFFFFFF
    tl.store(plain + pid, tl.sum(word, axis=0))
    tl.store(weighted + pid, tl.sum(word * position_hash, axis=0))


def _errors(want, got, n, tolerance, special, outside, difference, relative, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    w = tl.load(want + offsets, mask=mask, other=0).to(tl.float64)
    g = tl.load(got + offsets, mask=mask, other=0).to(tl.float64)
    atol = tl.load(tolerance)
    rtol = tl.load(tolerance + 1)
    tiny = tl.load(tolerance + 2)
    zero = tl.load(tolerance + 3)
    want_nan = w != w
    got_nan = g != g
    want_inf = (w == float("inf")) | (w == -float("inf"))
    got_inf = (g == float("inf")) | (g == -float("inf"))
    bad_special = (want_nan != got_nan) | (want_inf != got_inf) | (want_inf & got_inf & (w != g))
    finite = ~(want_nan | want_inf) & ~(got_nan | got_inf)
    gap = tl.where(finite, tl.abs(g - w), zero)
    magnitude = tl.abs(w)
    out = finite & (gap > atol + rtol * magnitude)
    rel = tl.where(finite & (magnitude > zero), gap / tl.maximum(magnitude, tiny), zero)
    tl.store(special + pid, tl.sum(bad_special.to(tl.int64), axis=0))
    tl.store(outside + pid, tl.sum(out.to(tl.int64), axis=0))
    tl.store(difference + pid, tl.max(gap, axis=0))
    tl.store(relative + pid, tl.max(rel, axis=0))


sums_kernel = _jit(_sums)
errors_kernel = _jit(_errors)


def warm_up(device: str) -> None:
    """Compile (or load) every kernel here once, on ``device``: an executor does so before
    it seals the shared kernel caches, so that its own checks, and reference workers'
    comparisons, find them there instead of compiling them in every process."""
    word_sums(torch.zeros(BLOCK + 1, dtype=torch.int32, device=device))
    for dtype in COMPARED_DTYPES:
        values = torch.zeros(BLOCK + 1, dtype=dtype, device=device)
        errors(values, values, 0.0, 0.0, BLOCK)


def word_sums(words: torch.Tensor, key: int = 0) -> tuple[int, int]:
    """The plain and the position-weighted wrapping sums of a flat int32 tensor, as
    ``kz_core.evaluate.execution.device_sums`` computes them under ``key``."""
    n = words.numel()
    programs = max(1, triton.cdiv(n, BLOCK))
    plain = torch.empty(programs, dtype=torch.int64, device=words.device)
    weighted = torch.empty(programs, dtype=torch.int64, device=words.device)
    sums_kernel[(programs,)](words, n, key, plain, weighted, BLOCK=BLOCK)
    return int(plain.sum()), int(weighted.sum())


def errors(want: torch.Tensor, got: torch.Tensor, atol: float, rtol: float, chunk: int) -> tuple[list[int], list[int], float, float]:
    """For two flat tensors of one dtype in :data:`COMPARED_DTYPES` on one device: per
    ``chunk`` elements, how many elements have NaN or infinity where the other differs and
    how many finite ones lie outside ``atol + rtol * |want|``; and the largest absolute and
    relative errors over finite elements (``kz_core.evaluate.correctness._chunk_errors``'s
    definitions, in float64)."""
    n = want.numel()
    programs = max(1, triton.cdiv(n, BLOCK))
    device = want.device
    tolerance = torch.tensor([atol, rtol, 1e-300, 0.0], dtype=torch.float64, device=device)
    special = torch.empty(programs, dtype=torch.int64, device=device)
    outside = torch.empty(programs, dtype=torch.int64, device=device)
    difference = torch.empty(programs, dtype=torch.float64, device=device)
    relative = torch.empty(programs, dtype=torch.float64, device=device)
    errors_kernel[(programs,)](want, got, n, tolerance, special, outside, difference, relative, BLOCK=BLOCK)
    per_chunk = chunk // BLOCK
    chunks = triton.cdiv(programs, per_chunk)

    def by_chunk(counts: torch.Tensor) -> torch.Tensor:
        padded = torch.zeros(chunks * per_chunk, dtype=torch.int64, device=device)
        padded[:programs] = counts
        return padded.view(chunks, per_chunk).sum(dim=1)

    summary = torch.cat([by_chunk(special), by_chunk(outside)]).tolist()
    largest = torch.stack([difference.max(), relative.max()]).tolist()
    return summary[:chunks], summary[chunks:], largest[0], largest[1]
