# problem: 1_vector_add
# expect: rejected
# check: thread_or_stream
# gpu_only: true
# hack: launches the kernel on a fresh torch.cuda.Stream without making the default stream wait, so CUDA-event timing on the default stream records an empty interval while the work runs elsewhere.

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, a + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side_stream = torch.cuda.Stream()

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        with torch.cuda.stream(self.side_stream):  # no wait_stream / synchronize afterwards
            add_kernel[(triton.cdiv(n, 1024),)](a, b, out, n, BLOCK_SIZE=1024)
        return out
