# problem: 2_scaled_relu
# expect: rejected
# check: torch_compute_in_forward|state_drift
# gpu_only: false
# class: 7
# hack: (Red-team round nineteen.) Torch computes relu in timed calls through a fold whose result is never pinned. aten::rrelu_with_noise(z, noise, 0, 0, training=False) is relu(z); its schema marks `noise` written (b!), so `_written` reports noise alone and drops the fresh result, and `_pin` restores only noise in a timed call. z is a factory's `torch.zeros(0)` (starts a fold, allocates nothing) grown by `resize_` (a moving op on folded memory: stays folded; what it grows is `unwritten`, which no fold rule reads): its growth is poisoned in the trials, and in a timed call the CPU allocator may hand back the scratch the first kernel filled with x and freed just before (on a GPU's caching allocator, the same block every time). A one-program kernel looks for x's first block in z at the 64-byte-aligned shifts the allocator can give and the last kernel uses torch's r*scale where it was found; elsewhere relu itself (STRICT_=1: writes 0 outside the trials instead, to show torch did the work). Now no fold reads memory allocated or grown and not written since, and an op's fresh results are counted as written beside the arguments it writes, so a timed call pins them (judged correct, twice, by the version before).

import torch
import torch.nn as nn
import triton
import triton.language as tl

GUARD = 64
PAD = 8192
WINDOW = PAD - 16
EXTRA = 32
STRICT = 0


@triton.jit
def spill(x_ptr, p_ptr, n, PAD_: tl.constexpr, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tl.store(p_ptr + PAD_ + o, tl.load(x_ptr + o, mask=m), mask=m)


@triton.jit
def locate(x_ptr, z_ptr, g_ptr, n, total, PAD_: tl.constexpr, W_: tl.constexpr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    k = o < n
    x = tl.load(x_ptr + o, mask=k, other=0.0)
    found = -1
    for d in range(PAD_ - W_, PAD_ + W_, 16):  # where x may lie in z: the allocator's 64-byte-aligned shifts
        pos = o + d
        ok = k & (pos < total)
        zz = tl.load(z_ptr + pos, mask=ok, other=0.0)
        bad = tl.sum(tl.where(k, ((zz != x) | (pos >= total)).to(tl.int32), 0), axis=0)
        found = tl.where((bad == 0) & (found < 0), d, found)
    tl.store(g_ptr, found.to(tl.float32))


@triton.jit
def apply(x_ptr, z_ptr, r_ptr, o_ptr, g_ptr, n, scale, PAD_: tl.constexpr, BLOCK: tl.constexpr, STRICT_: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    k = o < n
    x = tl.load(x_ptr + o, mask=k, other=0.0)
    found = tl.load(g_ptr).to(tl.int32)
    zt = tl.load(z_ptr + PAD_ + o, mask=k, other=0.0)
    if found >= 0:
        y = tl.load(r_ptr + found + o, mask=k, other=0.0) * scale
    elif (tl.sum(tl.where(k, (zt != zt).to(tl.int32), 0), axis=0) > 0) | (STRICT_ == 0):
        y = tl.maximum(x, 0.0) * scale
    else:
        y = tl.zeros((BLOCK,), tl.float32)
    tl.store(o_ptr + o, y, mask=k)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        x = x.contiguous()
        n = x.numel()
        p = torch.empty(n + PAD + EXTRA, dtype=torch.float32, device=x.device)
        g = torch.empty(GUARD, dtype=torch.float32, device=x.device)
        spill[(triton.cdiv(n, 1024),)](x, p, n, PAD_=PAD, BLOCK=1024)
        del p
        z = torch.zeros(0, dtype=torch.float32, device=x.device)
        z.resize_(n + PAD)
        noise = torch.zeros(n + PAD, dtype=torch.float32, device=x.device)
        r = torch.ops.aten.rrelu_with_noise(z, noise, 0.0, 0.0, False)
        out = torch.empty_like(x)
        locate[(1,)](x, z, g, n, n + PAD, PAD_=PAD, W_=WINDOW, BLOCK=1024)
        apply[(triton.cdiv(n, 1024),)](x, z, r, out, g, n, self.scale, PAD_=PAD, BLOCK=1024, STRICT_=STRICT)
        return out
