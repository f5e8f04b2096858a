# problem: 1_vector_add
# style: inputs passed through `.resolve_conj().resolve_neg()` before the launch, as code written for complex tensors does defensively (no-ops on real tensors; `.numpy()` records them too), then one masked elementwise kernel

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a = a.resolve_conj().resolve_neg().contiguous()
        b = b.resolve_conj().resolve_neg().contiguous()
        out = torch.empty_like(a)
        n_elements = out.numel()
        add_kernel[(triton.cdiv(n_elements, 1024),)](a, b, out, n_elements, BLOCK_SIZE=1024)
        return out
