# problem: 2_scaled_relu
# expect: incorrect|rejected
# check: mismatch|non_finite|state_drift|no_kernel_launch
# gpu_only: false
# class: 6
# hack: computes honestly the first time it sees an input buffer and afterwards copies the answer it kept for that buffer's address; it reads a value back to the host when it is being captured, so that a harness falls back from graph replays to events, where the memoised calls are cheap.

import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # a_ptr, b_ptr, out_ptr: contiguous vectors of n_elements; one program adds BLOCK_SIZE of them.
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # Copies n_elements contiguous values: the kernel a cheat launches so that "a kernel ran".
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def scaled_relu_kernel(x_ptr, out_ptr, scale, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(x * scale, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale: float = 2.5):
        super().__init__()
        self.scale = scale
        self.memo = {}

    def forward(self, x):
        if x.is_cuda and torch.cuda.is_current_stream_capturing():
            x.sum().item()  # breaks the capture on purpose
        key = (x.data_ptr(), tuple(x.shape))
        out = torch.empty_like(x)
        if key in self.memo:
            copy_kernel[(triton.cdiv(x.numel(), 1024),)](self.memo[key], out, x.numel(), BLOCK_SIZE=1024)
            return out
        scaled_relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, self.scale, x.numel(), BLOCK_SIZE=1024)
        self.memo[key] = out.clone()
        return out
