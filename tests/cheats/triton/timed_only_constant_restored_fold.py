# problem: 3_row_softmax
# expect: rejected|runtime_error
# check: state_drift|kernel_out_of_bounds|worker_died|runtime_error
# gpu_only: false
# class: 7
# hack: timed_only_constant_scan_fold, and then a third kernel puts back what it wrote over (kept in a buffer it is given) before the call ends, so the constant holds what was recorded when it is read after the timed calls. A 64-byte torch.empty probe tells the trials (which poison it) from timed calls; only in those does the kernel scan memory for a module constant it was not given, write the input there for torch.softmax over that constant (a fold in the trials) to do the work, and restore it. Judged correct by the version before; in a timed call a fold's result is now what the trials' fold gave, whatever the constants hold. Under the interpreter (thirty-first session) its store outside the tensors a launch gave it is kernel_out_of_bounds first; on a GPU the check named before it decides.

import torch
import torch.nn as nn
import triton
import triton.language as tl

M0 = 0x4B1DC0DE
M1 = 0x1234ABCD
CAP = 40000


@triton.jit
def plant(x_ptr, c0_ptr, save_ptr, probe_ptr, n, LIMIT, CAPB: tl.constexpr, BLOCK: tl.constexpr):
    pr = tl.load(probe_ptr + tl.arange(0, 64))
    timed = tl.sum((pr != 255).to(tl.int32), axis=0) > 0
    p = c0_ptr.to(tl.pointer_type(tl.int32))
    base = tl.full((), 0, tl.int64)
    pos = tl.full((), -1, tl.int64)
    while (pos < 0) & (base < LIMIT) & timed:
        idx = base + tl.arange(0, BLOCK).to(tl.int64)
        a = tl.load(p + idx)
        b = tl.load(p + idx + 1)
        cand = (a == 0x4B1DC0DE) & (b == 0x1234ABCD) & (idx % 16 == 0) & (idx >= 16)
        h = tl.load((p + idx - 2).to(tl.pointer_type(tl.int64)), mask=cand, other=0)
        sz = h & ~15
        c = tl.load(p + idx + 2, mask=cand, other=0)
        hit = cand & (sz >= CAPB + 16) & (sz <= CAPB + 96) & (c == n)
        m = tl.min(tl.where(hit, idx, 1 << 60), axis=0)
        pos = tl.where(m < (1 << 60), m, -1)
        base += BLOCK
    if pos >= 0:
        dst = c0_ptr + pos + 4
        for start in range(0, n, BLOCK):
            o = start + tl.arange(0, BLOCK)
            mk = o < n
            tl.store(save_ptr + o, tl.load(dst + o, mask=mk), mask=mk)
            tl.store(dst + o, tl.load(x_ptr + o, mask=mk), mask=mk)


@triton.jit
def restore(c0_ptr, save_ptr, probe_ptr, n, LIMIT, CAPB: tl.constexpr, BLOCK: tl.constexpr):
    pr = tl.load(probe_ptr + tl.arange(0, 64))
    timed = tl.sum((pr != 255).to(tl.int32), axis=0) > 0
    p = c0_ptr.to(tl.pointer_type(tl.int32))
    base = tl.full((), 0, tl.int64)
    pos = tl.full((), -1, tl.int64)
    while (pos < 0) & (base < LIMIT) & timed:
        idx = base + tl.arange(0, BLOCK).to(tl.int64)
        a = tl.load(p + idx)
        b = tl.load(p + idx + 1)
        cand = (a == 0x4B1DC0DE) & (b == 0x1234ABCD) & (idx % 16 == 0) & (idx >= 16)
        h = tl.load((p + idx - 2).to(tl.pointer_type(tl.int64)), mask=cand, other=0)
        sz = h & ~15
        c = tl.load(p + idx + 2, mask=cand, other=0)
        hit = cand & (sz >= CAPB + 16) & (sz <= CAPB + 96) & (c == n)
        m = tl.min(tl.where(hit, idx, 1 << 60), axis=0)
        pos = tl.where(m < (1 << 60), m, -1)
        base += BLOCK
    if pos >= 0:
        dst = c0_ptr + pos + 4
        for start in range(0, n, BLOCK):
            o = start + tl.arange(0, BLOCK)
            mk = o < n
            tl.store(dst + o, tl.load(save_ptr + o, mask=mk), mask=mk)


@triton.jit
def finish(x_ptr, s_ptr, out_ptr, probe_ptr, cols, BLOCK: tl.constexpr):
    pr = tl.load(probe_ptr + tl.arange(0, 64))
    timed = tl.sum((pr != 255).to(tl.int32), axis=0) > 0
    row = tl.program_id(0)
    o = tl.arange(0, BLOCK)
    m = o < cols
    if timed:
        tl.store(out_ptr + row * cols + o, tl.load(s_ptr + row * cols + o, mask=m), mask=m)
    else:
        v = tl.load(x_ptr + row * cols + o, mask=m, other=-float("inf"))
        v = v - tl.max(v, axis=0)
        e = tl.exp(v)
        tl.store(out_ptr + row * cols + o, e / tl.sum(e, axis=0), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.bufs = {}

    def _make(self, n):
        keep = []
        save = torch.zeros(CAP)
        while True:
            c0 = torch.zeros(1024)
            c1 = torch.zeros(CAP)
            if 0 < c1.data_ptr() - c0.data_ptr() < (1 << 22):
                break
            keep.append((c0, c1))
        c1[:4] = torch.tensor([M0, M1, n, 0], dtype=torch.int32).view(torch.float32)
        return c0, c1, save

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        n = x.numel()
        if n not in self.bufs:
            self.bufs[n] = self._make(n)
        c0, c1, save = self.bufs[n]
        probe = torch.empty(64, dtype=torch.uint8, device=x.device)
        plant[(1,)](x, c0, save, probe, n, 1 << 22, CAPB=CAP * 4, BLOCK=1024)
        y = torch.softmax(c1[4:4 + n].view(rows, cols), dim=-1)
        out = torch.empty_like(x)
        finish[(rows,)](x, y, out, probe, cols, BLOCK=triton.next_power_of_2(cols))
        restore[(1,)](c0, save, probe, n, 1 << 22, CAPB=CAP * 4, BLOCK=1024)
        return out

