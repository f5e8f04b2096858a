# problem: 3_row_softmax
# style: an online (single-read) softmax in the FlashAttention manner with exp2 and a module-level LOG2E = tl.constexpr(...), int64 row offsets, masks with other=-float('inf'), a launch mixing positional and keyword arguments with num_warps, .view(-1, n_cols) / out.view(x.shape), and a `__main__` block with a local check

import torch
import torch.nn as nn
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # Triton 3.6 compiles only globals built with tl.constexpr(...)


@triton.jit
def online_softmax_kernel(x_ptr, y_ptr, stride_x, stride_y, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row.to(tl.int64) * stride_x
    y_row = y_ptr + row.to(tl.int64) * stride_y
    m_i = tl.full((BLOCK_SIZE,), -float("inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m_i, x)
        # lanes that have seen nothing yet keep m = -inf: avoid (-inf) - (-inf)
        alpha = tl.where(m_new == -float("inf"), 0.0, tl.exp2((m_i - m_new) * LOG2E))
        p = tl.where(m_new == -float("inf"), 0.0, tl.exp2((x - m_new) * LOG2E))
        l_i = l_i * alpha + p
        m_i = m_new
    m = tl.max(m_i, axis=0)
    scale = tl.where(m_i == -float("inf"), 0.0, tl.exp2((m_i - m) * LOG2E))
    denom = tl.sum(l_i * scale, axis=0)
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp2((x - m) * LOG2E) / denom
        tl.store(y_row + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_cols = x.shape[-1]
        x2 = x.contiguous().view(-1, n_cols)
        out = torch.empty(x2.shape, device=x.device, dtype=x.dtype)
        BLOCK_SIZE = min(triton.next_power_of_2(n_cols), 256)
        online_softmax_kernel[(x2.shape[0],)](x2, out, x2.stride(0), out.stride(0), n_cols=n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
        return out.view(x.shape)


if __name__ == "__main__":
    for shape in [(64, 257), (4, 1), (3, 5000)]:
        x = torch.randn(*shape) * 4
        y = ModelNew()(x)
        print(shape, (y - torch.softmax(x, dim=-1)).abs().max().item())
