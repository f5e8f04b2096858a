# problem: 6_linear_gelu
# style: the weight copied to another memory layout in forward with .t().contiguous().t() (a layout copy, as kernels wanting a K-major weight make), its strides passed to a tiled matmul with the tanh GELU as x * sigmoid(2u) in the epilogue
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_gelu_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K,
                       sxm, sxk, swn, swk, sym, syn,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(x_ptr + rm[:, None] * sxm + rk[None, :] * sxk, mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[None, :] * swn + rk[:, None] * swk, mask=(rn[None, :] < N) & (rk[:, None] < K), other=0.0)
        acc += tl.dot(a, w, input_precision="ieee")
    acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    u = 0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)
    y = acc * tl.sigmoid(2.0 * u)
    tl.store(y_ptr + rm[:, None] * sym + rn[None, :] * syn, y, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        M, K = x.shape
        N = self.linear.weight.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=torch.float32)
        w = self.linear.weight.t().contiguous().t()  # a transposed copy, as kernels wanting K-major weights make
        grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
        linear_gelu_kernel[grid](x, w, self.linear.bias, y, M, N, K,
                                 x.stride(0), x.stride(1), w.stride(0), w.stride(1), y.stride(0), y.stride(1),
                                 BM=32, BN=32, BK=32)
        return y
