# problem: 6_linear_gelu
# style: Triton imported under a try/except ImportError guard that records availability (HAS_TRITON = False in the handler), forward raising a clear error when Triton is missing, `from triton.language import constexpr` used in annotations, a weight-stationary kernel over output-column tiles with the whole batch tile per program

import torch
import torch.nn as nn

try:
    import triton
    import triton.language as tl
    from triton.language import constexpr

    HAS_TRITON = True
except ImportError:  # pragma: no cover
    HAS_TRITON = False


@triton.jit
def linear_gelu_fwd(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K,
                    sxm, sxk, swn, swk, sym, syn,
                    BM: constexpr, BN: constexpr, BK: constexpr):
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        offs_k = k0 + tl.arange(0, BK)
        x = tl.load(x_ptr + offs_m[:, None] * sxm + offs_k[None, :] * sxk,
                    mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
        wt = tl.load(w_ptr + offs_n[None, :] * swn + offs_k[:, None] * swk,
                     mask=(offs_n[None, :] < N) & (offs_k[:, None] < K), other=0.0)
        acc = tl.dot(x, wt, acc, input_precision="ieee")
    acc = acc + tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0)[None, :]
    # gelu(tanh): 0.5 * h * (1 + tanh(u)) = h * sigmoid(2u) = h / (1 + exp(-2u))
    u = 0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)
    y = acc / (1.0 + tl.exp(-2.0 * u))
    tl.store(y_ptr + offs_m[:, None] * sym + offs_n[None, :] * syn, y,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        if not HAS_TRITON:
            raise RuntimeError("this module needs Triton")
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        w, b = self.linear.weight, self.linear.bias
        M, K = x.shape
        N = w.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        BM = 32 if M <= 32 else 64
        grid = (triton.cdiv(N, 32), triton.cdiv(M, BM))
        linear_gelu_fwd[grid](x, w, b, y, M, N, K,
                              x.stride(0), x.stride(1), w.stride(0), w.stride(1), y.stride(0), y.stride(1),
                              BM=BM, BN=32, BK=32)
        return y
