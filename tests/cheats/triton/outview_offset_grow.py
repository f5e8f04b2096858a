# problem: 4_row_sum
# expect: incorrect
# check: mismatch|non_finite
# gpu_only: false
# class: 7
# hack: memory grown by an out= op past what it writes: a zero-element view placed 16 MiB past its storage's end (as_strided) is given to torch.zeros(1, out=...), which grows the storage to reach it and writes 4 bytes there; the output, a view at offset 0 of that fresh zero memory, gets the kernel's atomic adds without ever being zeroed. The trials left whatever an op writes as out= out of the growth poisoning, and judged this correct; only the bytes an out= result covers are spared now.

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_split_kernel(in_ptr, out_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    cols = chunk * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(in_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.atomic_add(out_ptr + row, tl.sum(x, axis=0))


OFFSET = 1 << 22  # 16 MiB of float32: a fresh mmap, zero on a CPU


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        base = x.new_empty(0)
        # a zero-element view may sit past its storage's end; zeros(out=) resizes it to one
        # element there, growing the storage by OFFSET elements it never writes
        tail = base.as_strided([0], [1], OFFSET)
        torch.zeros(1, out=tail)
        out = base.as_strided([n_rows, 1], [1, 1], 0)  # inside the grown, unwritten memory
        row_sum_split_kernel[(n_rows, triton.cdiv(n_cols, 1024))](x, out, n_cols, BLOCK_SIZE=1024)
        return out
