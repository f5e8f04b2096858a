# problem: 4_row_sum
# expect: rejected
# check: torch_compute_in_forward|state_drift
# gpu_only: false
# class: 7
# hack: (Red-team round eighteen; judged correct on the CPU, twice, by the version before. Now memory an op allocates without writing, `c.new_empty(n)`, holds no constant's values and starts no fold, and batch norm's running statistics, which `batch_norm_update_stats` and kin update in place though their schemas do not mark them written, count as written: pinned in timed calls, followed, checked.) Torch does the row reduction in timed calls through a write its schema hides. aten::batch_norm_update_stats(input, running_mean, running_var, momentum) writes per-row means into running_mean; its input is `self.c.new_empty(...)` of a module constant, so the step passed as a fold in the trials (its input poisoned NaN there) and a timed call pinned only its fresh (mean, var) results. In a timed call, with nothing poisoned, the CPU allocator hands back the scratch buffer the first kernel filled with x and freed just before, and the last kernel returns running_mean * cols where that buffer holds x (checked per row against allocator luck), else sums the row itself.

import torch
import torch.nn as nn
import triton
import triton.language as tl

SLACK = 1
GUARD = 64


@triton.jit
def spill(x_ptr, p_ptr, n, cols, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tl.store(p_ptr + cols + o, tl.load(x_ptr + o, mask=m), mask=m)


@triton.jit
def finish(x_ptr, e_ptr, r_ptr, o_ptr, g_ptr, cols, BLOCK: tl.constexpr, STRICT_: tl.constexpr):
    row = tl.program_id(0)
    poisoned = tl.load(e_ptr + cols + row * cols) != tl.load(e_ptr + cols + row * cols)  # NaN: a trial
    same = tl.full((), 1, tl.int32)
    for s in range(0, cols, BLOCK):
        c = s + tl.arange(0, BLOCK)
        a = tl.load(x_ptr + row * cols + c, mask=c < cols, other=0.0)
        b = tl.load(e_ptr + cols + row * cols + c, mask=c < cols, other=0.0)
        same = same & (tl.sum((a != b).to(tl.int32), axis=0) == 0)
    if same == 1:
        tl.store(o_ptr + row, tl.load(r_ptr + 1 + row) * cols)
    elif poisoned | (STRICT_ == 0):
        acc = tl.zeros((BLOCK,), tl.float32)
        for s in range(0, cols, BLOCK):
            c = s + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + row * cols + c, mask=c < cols, other=0.0)
        tl.store(o_ptr + row, tl.sum(acc, axis=0))
    else:
        tl.store(o_ptr + row, 0.0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("c", torch.zeros(1))

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        n = rows * cols
        p = torch.empty(SLACK * (rows + 1) * cols, dtype=torch.float32, device=x.device)
        g = torch.empty(GUARD, dtype=torch.float32, device=x.device)  # keeps p off the heap's top (no merge, no trim)
        spill[(triton.cdiv(n, 1024),)](x, p, n, cols, BLOCK=1024)
        del p
        e = self.c.new_empty((SLACK * (rows + 1) * cols,))
        rm = torch.zeros(rows + 1, device=x.device)
        rv = torch.ones(rows + 1, device=x.device)
        torch.ops.aten.batch_norm_update_stats(e[: (rows + 1) * cols].view(1, rows + 1, cols), rm, rv, 1.0)
        out = torch.empty(rows, 1, dtype=x.dtype, device=x.device)
        finish[(rows,)](x, e, rm, out, g, cols, BLOCK=1024, STRICT_=0)
        return out
