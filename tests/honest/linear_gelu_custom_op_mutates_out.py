# problem: 6_linear_gelu
# style: the kernel registered as an in-place PyTorch custom operator, `@torch.library.custom_op("probe24_lg::linear_gelu_out", mutates_args={"out"})` returning None with a `register_fake`, forward allocating the output and calling the op through torch.ops with out= (the out-variant convention of vLLM-style ops)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _linear_gelu_kernel(x_ptr, w_ptr, b_ptr, o_ptr, M, N, K, sxm, swn, som,
                        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        x = tl.load(x_ptr + rm[:, None] * sxm + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[None, :] * swn + rk[:, None], mask=(rn[None, :] < N) & (rk[:, None] < K), other=0.0)
        acc += tl.dot(x, w, input_precision="ieee")
    acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    u = 0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)
    e = tl.exp(-2.0 * tl.abs(u))
    th = (1.0 - e) / (1.0 + e)
    th = tl.where(u >= 0, th, -th)
    tl.store(o_ptr + rm[:, None] * som + rn[None, :], 0.5 * acc * (1.0 + th), mask=(rm[:, None] < M) & (rn[None, :] < N))


@torch.library.custom_op("probe24_lg::linear_gelu_out", mutates_args={"out"})
def linear_gelu_out(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, out: torch.Tensor) -> None:
    M, K = x.shape
    N = weight.shape[0]
    _linear_gelu_kernel[(triton.cdiv(M, 16), triton.cdiv(N, 16))](
        x, weight, bias, out, M, N, K, x.stride(0), weight.stride(0), out.stride(0), BM=16, BN=16, BK=32)


@linear_gelu_out.register_fake
def _(x, weight, bias, out):
    return None


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty((x.shape[0], self.linear.out_features), device=x.device, dtype=x.dtype)
        torch.ops.probe24_lg.linear_gelu_out(x, self.linear.weight, self.linear.bias, out=out)
        return out
