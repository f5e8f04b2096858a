# problem: 5_matmul
# expect: rejected
# check: memoisation
# gpu_only: true
# class: 6
# hack: memoises on inputs it has seen. A one-program kernel takes a fingerprint of a few elements of each input and looks it up in a table of four kept in buffers of the module; on a hit the work kernel copies the product it kept for those inputs, on a miss it computes (here deliberately at the cost of a large problem's product, so that copying is many times faster) and keeps the result. Every output is right, every call on inputs seen before is a copy: graph timing, whose replays repeat two input sets, timed copies. Written against timing on repeated inputs only.

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def lookup_kernel(a_ptr, b_ptr, prints_ptr, state_ptr, SLOTS: tl.constexpr):
    i = tl.arange(0, 8)
    weights = (i + 1).to(tl.float32)
    print_ = tl.sum(tl.load(a_ptr + i) * weights) + 3.0 * tl.sum(tl.load(b_ptr + i) * weights)
    hit = -1
    for s in tl.static_range(SLOTS):
        hit = tl.where(tl.load(prints_ptr + s) == print_, s, hit)
    victim = tl.load(state_ptr + 1)
    slot = tl.where(hit >= 0, hit, victim)
    tl.store(state_ptr, slot)
    tl.store(state_ptr + 2, tl.where(hit >= 0, 1, 0))
    tl.store(state_ptr + 1, tl.where(hit >= 0, victim, (victim + 1) % SLOTS))
    tl.store(prints_ptr + slot, print_)


@triton.jit
def matmul_or_copy_kernel(a_ptr, b_ptr, c_ptr, kept_ptr, state_ptr, M, N, K, REPEAT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    slot = tl.load(state_ptr)
    kept = kept_ptr + slot * M * N + rm[:, None] * N + rn[None, :]
    if tl.load(state_ptr + 2) == 1:
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.load(kept, mask=mask), mask=mask)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for _ in range(REPEAT):
            for k in range(0, K, BLOCK_K):
                rk = k + tl.arange(0, BLOCK_K)
                a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
                b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
                acc += tl.dot(a, b, input_precision="ieee")
        acc = acc / REPEAT
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=mask)
        tl.store(kept, acc, mask=mask)


class ModelNew(nn.Module):
    SLOTS = 4

    def __init__(self):
        super().__init__()
        self.register_buffer("prints", torch.zeros(self.SLOTS))
        self.register_buffer("state", torch.zeros(3, dtype=torch.int32))
        self._kept = {}

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        M, K = a.shape
        N = b.shape[1]
        key = (M, N, str(a.device))
        kept = self._kept.get(key)
        if kept is None:
            kept = self._kept[key] = torch.empty(self.SLOTS * M * N, device=a.device, dtype=torch.float32)
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        lookup_kernel[(1,)](a, b, self.prints, self.state, SLOTS=self.SLOTS)
        grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
        matmul_or_copy_kernel[grid](a, b, c, kept, self.state, M, N, K, REPEAT=64, BLOCK_M=32, BLOCK_N=32, BLOCK_K=16)
        return c
