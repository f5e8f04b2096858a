# problem: 4_row_sum
# style: two variants of one kernel under a module-level `if USE_ATOMICS:` switch of a literal constant (column blocks added atomically into a zeroed output, or one program looping over its row), and the reduction kept in two classes that each name their @staticmethod kernel `kernel`

import torch
import torch.nn as nn
import triton
import triton.language as tl

USE_ATOMICS = True
BLOCK = 1024

if USE_ATOMICS:
    @triton.jit
    def row_sum_kernel(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        start = tl.program_id(1) * BLOCK
        offsets = start + tl.arange(0, BLOCK)
        values = tl.load(x_ptr + row * cols + offsets, mask=offsets < cols, other=0.0)
        tl.atomic_add(out_ptr + row, tl.sum(values, axis=0))
else:
    @triton.jit
    def row_sum_kernel(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for start in range(0, cols, BLOCK):
            offsets = start + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + row * cols + offsets, mask=offsets < cols, other=0.0)
        tl.store(out_ptr + row, tl.sum(acc, axis=0))


class Scale:
    @staticmethod
    @triton.jit
    def kernel(x_ptr, n, factor, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * factor, mask=mask)


class RowSum:
    @staticmethod
    @triton.jit
    def kernel(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for start in range(0, cols, BLOCK):
            offsets = start + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + row * cols + offsets, mask=offsets < cols, other=0.0)
        tl.store(out_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        halves = torch.zeros(rows, 1, device=x.device, dtype=x.dtype)
        if USE_ATOMICS:
            row_sum_kernel[(rows, triton.cdiv(cols, BLOCK))](x, halves, cols, BLOCK=BLOCK)
        else:
            row_sum_kernel[(rows,)](x, halves, cols, BLOCK=BLOCK)
        # the same sum again through the classes' kernels, halved and added: both paths run
        twice = torch.empty(rows, 1, device=x.device, dtype=x.dtype)
        RowSum.kernel[(rows,)](x, twice, cols, BLOCK=BLOCK)
        Scale.kernel[(1,)](twice, rows, 0.5, BLOCK=triton.next_power_of_2(rows))
        Scale.kernel[(1,)](halves, rows, 0.5, BLOCK=triton.next_power_of_2(rows))
        out = torch.empty(rows, 1, device=x.device, dtype=x.dtype)
        Sum2.kernel[(1,)](halves, twice, out, rows, BLOCK=triton.next_power_of_2(rows))
        return out


class Sum2:
    @staticmethod
    @triton.jit
    def kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)
