# problem: 1_vector_add
# expect: rejected
# check: thread_or_stream
# gpu_only: true
# class: 7
# hack: the same side stream as side_stream.py, created through getattr so that no source check sees torch.cuda.Stream; only the runtime stream accounting catches it.

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
        self.side_stream = getattr(torch.cuda, 'Str' + 'eam')()

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        with getattr(torch.cuda, 'str' + 'eam')(self.side_stream):  # no wait_stream / synchronize afterwards
            add_kernel[(triton.cdiv(n, 1024),)](a, b, out, n, BLOCK_SIZE=1024)
        return out
