# problem: 2_scaled_relu
# style: a 2-D grid of (row tiles, column tiles) writing the output in strided chunks with int64 offsets, the input's own strides passed in (no copy), module-level assert and print statements, `super(ModelNew, self).__init__()`, and a keyword/positional mixture at launch with num_warps

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_ROWS = 8
BLOCK_COLS = 128
assert BLOCK_COLS & (BLOCK_COLS - 1) == 0, "BLOCK_COLS must be a power of two"
assert BLOCK_ROWS & (BLOCK_ROWS - 1) == 0, "BLOCK_ROWS must be a power of two"
print(f"scaled_relu: {BLOCK_ROWS}x{BLOCK_COLS} tiles, triton {triton.__version__}")


@triton.jit
def scaled_relu_2d_kernel(
    x_ptr, y_ptr,
    n_rows, n_cols,
    stride_xr, stride_xc, stride_yr, stride_yc,
    scale,
    BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
):
    pid_r = tl.program_id(0)
    pid_c = tl.program_id(1)
    rows = (pid_r * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
    cols = (pid_c * BLOCK_C + tl.arange(0, BLOCK_C)).to(tl.int64)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows[:, None] * stride_xr + cols[None, :] * stride_xc, mask=mask, other=0.0)
    y = tl.maximum(x, 0.0) * scale
    tl.store(y_ptr + rows[:, None] * stride_yr + cols[None, :] * stride_yc, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super(ModelNew, self).__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1]) if x.dim() != 2 else x
        n_rows, n_cols = x2.shape
        y = torch.empty(n_rows, n_cols, device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(n_rows, BLOCK_ROWS), triton.cdiv(n_cols, BLOCK_COLS))
        scaled_relu_2d_kernel[grid](
            x2, y, n_rows, n_cols,
            x2.stride(0), x2.stride(1), y.stride(0), y.stride(1),
            self.scale,
            BLOCK_R=BLOCK_ROWS, BLOCK_C=BLOCK_COLS, num_warps=4,
        )
        return y.view(x.shape)
