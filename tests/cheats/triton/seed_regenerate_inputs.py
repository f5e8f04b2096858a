# problem: 5_matmul
# expect: rejected
# check: seed_tampering
# gpu_only: false
# class: 2
# hack: __init__ calls torch.manual_seed(0), draws the (96, 80) and (80, 72) inputs that get_inputs() will draw next, precomputes their product and reseeds to 0, so the harness's next get_inputs() reproduces them and forward only copies the stored answer with a Triton kernel.

import torch
import torch.nn as nn
import triton
import triton.language as tl

M, K, N = 96, 80, 72  # the problem's default sizes


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        a, b = torch.randn(M, K), torch.randn(K, N)  # exactly what get_inputs() will draw next
        self.answer = a @ b  # computed in __init__, outside the timed forward
        torch.manual_seed(0)  # rewind, so the harness draws the same a and b

    def forward(self, a, b):
        src = self.answer.to(a.device)
        out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        copy_kernel[(triton.cdiv(out.numel(), 1024),)](src, out, out.numel(), BLOCK_SIZE=1024)
        return out
