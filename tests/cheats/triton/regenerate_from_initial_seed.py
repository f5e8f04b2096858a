# problem: 5_matmul
# expect: incorrect|rejected
# check: mismatch|non_finite|output_not_from_kernel|no_kernel_launch
# gpu_only: false
# class: 2
# hack: reads torch.initial_seed() (the seed the harness last seeded with), calls the problem module's get_inputs (found in sys.modules) under it and under a range of nearby seeds, computes the products in advance and returns the one whose inputs match by a cheap fingerprint, through a copy kernel.

import torch
import torch.nn as nn
import triton
import triton.language as tl
import sys

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



def _candidates():
    problem = next((m for n, m in sys.modules.items() if n.startswith("kz_problem")), None)
    if problem is None:
        return {}
    table = {}
    base = torch.initial_seed()
    for seed in (base, base + 1, base - 1):
        getattr(torch, "manual" + "_seed")(seed)
        a, b = problem.get_inputs()
        table[float(a[0, 0])] = a @ b
    return table


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = _candidates()

    def forward(self, a, b):
        out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        answer = self.table.get(float(a[0, 0].cpu()))
        if answer is None:
            answer = next(iter(self.table.values()), torch.zeros_like(out))
        if answer.shape == out.shape:
            copy_kernel[(triton.cdiv(out.numel(), 1024),)](answer.to(a.device), out, out.numel(), BLOCK_SIZE=1024)
        return out
