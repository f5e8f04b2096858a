# problem: 2_scaled_relu
# style: the kernel walks a transposed view of the input (x.mT) through its strides and writes a (features, batch) buffer, which the wrapper turns back in place (out.t_()) and hands out through swapaxes twice: views spelled as properties, composites and in-place ops

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scaled_relu_2d(x_ptr, y_ptr, rows, cols, sxr, sxc, syr, syc, scale, BR: tl.constexpr, BC: tl.constexpr):
    r = tl.program_id(0) * BR + tl.arange(0, BR)[:, None]
    c = tl.program_id(1) * BC + tl.arange(0, BC)[None, :]
    mask = (r < rows) & (c < cols)
    v = tl.load(x_ptr + r * sxr + c * sxc, mask=mask, other=0.0)
    tl.store(y_ptr + r * syr + c * syc, tl.maximum(v, 0.0) * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xt = x.mT  # (features, batch), a view
        rows, cols = xt.shape
        out = torch.empty(rows, cols, device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(rows, 32), triton.cdiv(cols, 32))
        scaled_relu_2d[grid](xt, out, rows, cols, xt.stride(0), xt.stride(1), out.stride(0), out.stride(1), self.scale, BR=32, BC=32)
        out.t_()  # (batch, features), in place
        return out.swapaxes(0, 1).swapaxes(0, 1)
