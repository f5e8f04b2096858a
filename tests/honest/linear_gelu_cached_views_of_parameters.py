# problem: 6_linear_gelu
# style: views of the parameters cached on the module at the first call, no copies: the transposed weight `self.linear.weight.T` (a (K, N) view with strides (1, K)) read through its own strides, and the bias's two halves `self.linear.bias.chunk(2)`, each given to the launch over its half of the output columns

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_gelu_kernel(x_ptr, wt_ptr, b_ptr, y_ptr, M, N, K, col0, swk, swn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)  # columns of this half
    acc = tl.zeros([BM, BN], tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + tl.arange(0, BK)
        a = tl.load(x_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        w = tl.load(wt_ptr + kk[:, None] * swk + (col0 + rn[None, :]) * swn, mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, w, input_precision="ieee")
    acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    inner = 0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)
    y = 0.5 * acc * (1.0 + (2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0))
    tl.store(y_ptr + rm[:, None] * (2 * N) + col0 + rn[None, :], y, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self._views = None

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._views is None:
            self._views = (self.linear.weight.T, *self.linear.bias.chunk(2))
        wt, first, second = self._views
        x = x.contiguous()
        M, K = x.shape
        half = first.numel()
        assert second.numel() == half and 2 * half == wt.shape[1], "an even number of output features"
        y = torch.empty((M, 2 * half), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, 16), triton.cdiv(half, 16))
        for col0, bias in ((0, first), (half, second)):
            linear_gelu_kernel[grid](x, wt, bias, y, M, half, K, col0, wt.stride(0), wt.stride(1), BM=16, BN=16, BK=16)
        return y
