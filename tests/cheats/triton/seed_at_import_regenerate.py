# problem: 5_matmul
# expect: incorrect
# check: mismatch
# gpu_only: false
# class: 2
# hack: seed_regenerate_inputs moved to module level, where seeding is only a warning (seed_at_import, for Triton's tutorials): at import it seeds 0, draws the (96, 80) and (80, 72) inputs a harness seeded with 0 would draw, precomputes their product and seeds 0 again; forward only copies the stored answer with a Triton kernel. kz draws every input after the import, from secret seeds, so the answer is wrong.

import torch
import torch.nn as nn
import triton
import triton.language as tl

M, K, N = 96, 80, 72  # the problem's default sizes

torch.manual_seed(0)
_A, _B = torch.randn(M, K), torch.randn(K, N)
ANSWER = _A @ _B  # computed at import, outside the timed forward
torch.manual_seed(0)  # rewind, so that a harness drawing next draws the same a and b


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        src = ANSWER.to(a.device)
        out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        copy_kernel[(triton.cdiv(out.numel(), 1024),)](src, out, out.numel(), BLOCK_SIZE=1024)
        return out
