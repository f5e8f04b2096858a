# problem: 4_row_sum
# expect: runtime_error
# check: not_replayable
# gpu_only: false
# class: 7
# hack: torch finishes the reduction through a sparse tensor: a sparse_coo_tensor step whose values are the partial sums' memory itself (no copy), with duplicate indices, is made before the kernel writes the partials; to_dense() then adds the duplicates. A tensor without a storage was keyed by its Python identity, so the lineage never linked it to the kernel-written memory and both ops passed as host arithmetic; judged correct by the version before. A plan's tensors must now be strided. Since red-team round twenty-four it is refused before it runs (not_replayable): its plan names aten::sparse_coo_tensor.indices_size, a composite operator, which a plan may not name.

import sys
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def half_sums(x_ptr, p_ptr, rows, cols, half, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    part = tl.program_id(1)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, half, BLOCK):
        lanes = start + tl.arange(0, BLOCK)
        column = part * half + lanes
        acc += tl.load(x_ptr + row * cols + column, mask=(lanes < half) & (column < cols), other=0.0)
    tl.store(p_ptr + row * 2 + part, tl.sum(acc, axis=0))  # two partial sums per row, never added


def _recorder():
    m = sys.modules.get("kz" + "_core.evaluate.recording")
    return m.active() if m is not None else None


def sparse_over(index, values, size):
    """aten::sparse_coo_tensor.indices_size(index, values, [size]): a COO tensor whose values
    ARE `values` (no copy). Recorded by hand: Python's torch.sparse_coo_tensor records the
    op with layout=sparse_coo, which no plan tag can hold; this overload needs none."""
    rec = _recorder()
    op = torch.ops.aten.sparse_coo_tensor.indices_size
    if rec is None:
        return op(index, values, [size])
    with rec.suspend():
        out = op(index, values, [size])
    rec.steps.append({"kind": "op", "op": ["aten", "sparse_coo_tensor", "indices_size"],
                      "args": [rec.ref(index), rec.ref(values), [size]], "kwargs": {},
                      "out": {"t": list(rec._new_value(out))}})
    return out


GROUP = 16  # rows per sparse tensor: 32 values, 16 sums (each op of it <= 64 elements)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        buf = torch.empty(3 * rows, dtype=x.dtype, device=x.device)
        groups = []
        for g in range(0, rows, GROUP):
            n = min(GROUP, rows - g)
            index = torch.tensor([[i // 2 for i in range(2 * n)]], device=x.device)
            # made before the kernel writes buf: no input reached it yet (host arithmetic)
            groups.append((g, n, sparse_over(index, buf[2 * g: 2 * (g + n)], n)))
        half = (cols + 1) // 2
        half_sums[(rows, 2)](x, buf, rows, cols, half, BLOCK=512)
        for g, n, parts in groups:
            # to_dense sums the duplicate indices: each row's two partials. It reads only the
            # sparse tensor, keyed by its Python identity, never reached: host arithmetic.
            buf[2 * rows + g: 2 * rows + g + n].copy_(parts.to_dense())
        return buf[2 * rows:].view(rows, 1)
