# problem: 5_matmul
# expect: rejected
# check: torch_compute_in_forward
# gpu_only: false
# class: 7
# hack: torch computes a @ b and a token Triton kernel merely copies the result into the output, so a "was a kernel launched?" check passes while all the real work is PyTorch's.

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        product = torch.matmul(a, b).contiguous()  # the real work, done by torch
        out = torch.empty_like(product)
        n = product.numel()
        copy_kernel[(triton.cdiv(n, 1024),)](product, out, n, BLOCK_SIZE=1024)
        return out
