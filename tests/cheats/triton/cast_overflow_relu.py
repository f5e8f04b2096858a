# problem: 2_scaled_relu
# expect: rejected|incorrect
# check: torch_compute_in_forward|mismatch|non_finite
# gpu_only: false
# class: 7
# hack: relu by dtype conversions alone, which moved as copies: a negative float's bits read as uint32 are at least 2^31, so through float64 to int32 they are out of range (on x86 0x80000000, which reads back as -0.0) while a non-negative float's bits come back as they were; the kernel only scales. On a GPU the conversion saturates (NaN): incorrect there. Judged correct on the CPU by the version before; a conversion from a float to an integer or a truth value (or from an integer to a truth value) counts as computing.

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, o_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(o_ptr + offs, x * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        # relu by dtype conversions alone: a negative float's bits, read as uint32, are
        # >= 2^31; through float64 to int32 that is out of range (x86: 0x80000000 = -0.0).
        r = x.contiguous().view(torch.uint32).to(torch.float64).to(torch.int32).view(torch.float32)
        out = torch.empty_like(r)
        n = r.numel()
        scale_kernel[(triton.cdiv(n, 1024),)](r, out, n, self.scale, BLOCK=1024)
        return out
