# problem: 2_scaled_relu
# expect: rejected
# check: torch_compute_in_forward
# gpu_only: false
# class: 7
# hack: the sign test done by sign extension, a move between integers: each input's top byte read as int8 and widened to int16 has a high byte of 0xFF exactly when the input is negative; made a float (-1 or 0) it is a mask the kernel applies as (x + x*m) * scale, with no comparison of its own. Judged correct by the version before; any conversion of bytes that were viewed as another dtype counts as computing.

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def fma_kernel(x_ptr, m_ptr, o_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    m = tl.load(m_ptr + offs, mask=mask)
    tl.store(o_ptr + offs, (x + x * m) * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        flat = x.contiguous().view(-1)
        n = flat.numel()
        top = flat.view(torch.int8).view(n, 4)[:, 3]          # sign + high exponent bits, as int8
        wide = top.to(torch.int16)                             # sign extension
        m = wide.view(torch.int8).view(n, 2)[:, 1].to(torch.float32)   # -1.0 if x < 0 else 0.0
        out = torch.empty_like(flat)
        fma_kernel[(triton.cdiv(n, 1024),)](flat, m, out, n, self.scale, BLOCK=1024)
        return out.view(x.shape)
