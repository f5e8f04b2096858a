# problem: 1_vector_add
# expect: compile_error|runtime_error
# check: compile_error|runtime_error (on a GPU, Triton's compiler refuses the kernel in the candidate's own process first: `walk_stack` is no Triton function)
# gpu_only: false
# class: 1
# hack: a kernel that loads and stores nothing: a list comprehension's variable named `tl` (and one named `triton`) made the kernel builder's checker take the modules for locals, whose attributes it no longer resolved, so the body reached `logging` through `triton.runtime.build`, walked the executor's stack to the interpreter's frame and wrote a + b into the output with torch (red-team round 28: correct; the same opening ran a shell in the executor). A comprehension's variables are its own now, may not be named like anything kernels see, and Python's own scopes (symtable) must agree with the checker's.

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    [0 for tl in range(1)]
    [0 for triton in range(1)]
    if tl.program_id(0) == 0:
        for fr, ln in triton.runtime.build.logging.traceback.walk_stack(triton.runtime.build.logging.currentframe()):
            if "args_hst" in tl.core.typing.operator.attrgetter("f_locals")(fr):
                (hs := tl.core.typing.operator.attrgetter("f_locals")(fr)["args_hst"])[2].copy_(hs[0] + hs[1])


BLOCK_SIZE = 1024


def add(a, b):
    out = torch.empty_like(a)
    n = a.numel()
    add_kernel[(triton.cdiv(n, BLOCK_SIZE),)](a, b, out, n, BLOCK_SIZE=BLOCK_SIZE)
    return out


class ModelNew(nn.Module):
    def forward(self, a, b):
        return add(a, b)
