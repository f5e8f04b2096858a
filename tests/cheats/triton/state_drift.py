# problem: 1_vector_add
# expect: rejected
# check: state_drift|no_kernel_launch (a second recording after a secret number of calls, or the size variation's, sees the forward stop launching)
# gpu_only: false
# class: 6
# hack: correct for its first three calls (a harness's warm-up and first checked trial), then returns an uninitialised buffer without launching anything, which would make timed calls nearly free. The recorder records the same call again after a secret number of further calls (and, on a GPU, under graph capture): the two plans differ. A forward that changes only after more calls than the recorder makes is replayed as it was recorded, so what is timed is the recorded work: it gains nothing (docs/security.md).

import torch
import torch.nn as nn
import triton
import triton.language as tl

CALLS = [0]  # module-level, so that new ModelNew instances share the count


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # a_ptr, b_ptr, out_ptr: contiguous vectors of n_elements; one program adds BLOCK_SIZE of them.
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        CALLS[0] += 1
        out = torch.empty_like(a)
        if CALLS[0] <= 3:  # the warm-up calls and the first checked one
            n = a.numel()
            add_kernel[(triton.cdiv(n, 1024),)](a, b, out, n, BLOCK_SIZE=1024)
        return out
