# problem: 2_scaled_relu
# expect: rejected
# check: torch_compute_in_forward
# gpu_only: false
# class: 7
# hack: the sign test done by a cast, which moved as a copy: torch joins the bytes [0, 0, top, 0x3F] (top: each input's sign and high exponent bits) into floats in [0.5, 1) for x >= 0 and [1, 2) for x < 0, and truncation to int32 (IEEE-defined, on any device) makes them 0 or 1; the kernel only selects and scales. Judged correct by the version before; a conversion from a float to an integer or a truth value counts as computing.

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def masked_scale_kernel(x_ptr, m_ptr, o_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    drop = tl.load(m_ptr + offs, mask=mask)
    tl.store(o_ptr + offs, tl.where(drop != 0, 0.0, x) * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        flat = x.contiguous().view(-1)
        n = flat.numel()
        top = flat.view(torch.uint8).view(n, 4)[:, 3]  # sign bit + high exponent bits
        zero = torch.zeros(n, dtype=torch.uint8, device=x.device)
        high = torch.full((n,), 0x3F, dtype=torch.uint8, device=x.device)
        # float32 bytes [0, 0, top, 0x3F]: top's sign bit lands on the exponent's low bit,
        # so the value is in [0.5, 1) for x >= 0 and [1, 2) for x < 0; truncation to an
        # integer (an IEEE-defined conversion) is the sign test.
        probe = torch.stack([zero, zero, top, high], dim=1).view(torch.float32).view(n)
        negative = probe.to(torch.int32)
        out = torch.empty_like(flat)
        masked_scale_kernel[(triton.cdiv(n, 1024),)](flat, negative, out, n, self.scale, BLOCK=1024)
        return out.view(x.shape)
