# problem: 1_vector_add
# expect: rejected
# check: torch_compute_in_forward
# gpu_only: false
# class: 7
# hack: torch does the whole vector add with _foreach_add_ over lists of 0-dim views (unbind), two chunks of 4096 elements: four ops, each on tensors of one element, so they passed as a loss's scalar epilogue (at most four single-element ops a call); a no-op kernel receives the output. Judged correct by the version before; ops over lists of tensors are never host arithmetic or epilogues, and an epilogue op has at most four tensors.

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def touch(p_ptr):
    pass


class ModelNew(nn.Module):
    def forward(self, a, b):
        n = a.numel()
        out = torch.zeros(n, dtype=a.dtype, device=a.device)
        touch[(1,)](out)                      # the kernel "receives" the output: kernel-derived
        CH = 4096                             # a plan list holds at most 4096 items
        for s in range(0, n, CH):
            dst = out[s:s + CH].unbind()      # 0-dim views: every tensor of the op is 1 element
            torch._foreach_add_(list(dst), list(a[s:s + CH].unbind()))
            torch._foreach_add_(list(dst), list(b[s:s + CH].unbind()))
        return out
