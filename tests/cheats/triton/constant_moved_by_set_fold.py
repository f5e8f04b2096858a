# problem: 3_row_softmax
# expect: rejected|runtime_error
# check: torch_compute_in_forward|kernel_out_of_bounds|worker_died|runtime_error (its scan of the executor's memory may reach an unmapped page)
# gpu_only: false
# class: 7
# hack: the parameter folding's unwritten constants were keyed by address but fingerprinted as objects: a view keeps a module constant's memory A alive, c1.set_ moves the constant onto identical bytes elsewhere, a kernel given only the input and another constant scans memory for A's header and writes the input there, and torch.softmax over the view reads only A, still taken for an unwritten constant, so it passed as folding at full size (set_ puts the constant back for the next call). Judged correct by the version before; a constant's memory is held and fingerprinted where it lay at the call's start, and what an op wrote is dropped from the unwritten constants where it lay before the op too. Under the interpreter (thirty-first session) its store outside the tensors a launch gave it is kernel_out_of_bounds first; on a GPU the check named before it decides.

import torch
import torch.nn as nn
import triton
import triton.language as tl

M0 = 0x4B1DC0DE
M1 = 0x1234ABCD
CAP = 40000


@triton.jit
def plant(x_ptr, c0_ptr, n, LIMIT, CAPB: tl.constexpr, BLOCK: tl.constexpr):
    p = c0_ptr.to(tl.pointer_type(tl.int32))
    base = tl.full((), 0, tl.int64)
    pos = tl.full((), -1, tl.int64)
    while (pos < 0) & (base < LIMIT):
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
            tl.store(dst + o, tl.load(x_ptr + o, mask=mk), mask=mk)


@triton.jit
def copy(src, dst, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tl.store(dst + o, tl.load(src + o, mask=m), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.bufs = {}

    def _make(self, n):
        keep = []
        while True:
            c0 = torch.zeros(1024)
            c1 = torch.zeros(CAP)
            if 0 < c1.data_ptr() - c0.data_ptr() < (1 << 22):
                break
            keep.append((c0, c1))
        c1[:4] = torch.tensor([M0, M1, n, 0], dtype=torch.int32).view(torch.float32)
        return c0, c1

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        n = x.numel()
        if n not in self.bufs:
            self.bufs[n] = self._make(n)
        c0, c1 = self.bufs[n]
        v = c1.view(-1)                                   # keeps memory A (the pristine key) alive
        f = torch.cat([torch.zeros(16), c1])
        c1.set_(f[16:])                         # the constant object now sits elsewhere, same bytes
        plant[(1,)](x, c0, n, 1 << 22, CAPB=CAP * 4, BLOCK=1024)
        y = torch.softmax(v[4:4 + n].view(rows, cols), dim=-1)
        out = torch.empty_like(x)
        copy[(triton.cdiv(n, 1024),)](y, out, n, BLOCK=1024)
        c1.set_(v)                                        # back on A for the next call
        return out
