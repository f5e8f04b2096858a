# problem: 2_scaled_relu
# expect: rejected
# check: torch_compute_in_forward
# gpu_only: false
# class: 7
# hack: kernel_pointer_dtype_sign_extension with the pointer cast to (dst + tl.arange(0, 2)).type.element_ty, a pointer type reached through a block of pointers' element type, which the source rule accepted as a dtype written out. Judged correct by the version before; what Triton builds at a launch decides.

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bytes_kernel(src_ptr, dst_ptr, nbytes, BLOCK: tl.constexpr):
    # a plain byte copy: the source's bytes into an int8 buffer
    s = src_ptr.to((dst_ptr + tl.arange(0, 2)).type.element_ty)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < nbytes
    tl.store(dst_ptr + offs, tl.load(s + offs, mask=mask), mask=mask)


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
        raw = torch.empty(4 * n, dtype=torch.int8, device=x.device)
        bytes_kernel[(triton.cdiv(4 * n, 1024),)](flat, raw, 4 * n, BLOCK=1024)
        wide = raw[3::4].to(torch.int16)                      # sign extension of the top byte
        raw2 = torch.empty(2 * n, dtype=torch.int8, device=x.device)
        bytes_kernel[(triton.cdiv(2 * n, 1024),)](wide, raw2, 2 * n, BLOCK=1024)
        m = raw2[1::2].to(torch.float32)                      # -1.0 if x < 0 else 0.0
        out = torch.empty_like(flat)
        fma_kernel[(triton.cdiv(n, 1024),)](flat, m, out, n, self.scale, BLOCK=1024)
        return out.view(x.shape)
