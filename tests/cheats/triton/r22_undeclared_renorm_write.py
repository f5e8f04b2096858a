# problem: 3_row_softmax
# expect: runtime_error
# check: not_replayable
# gpu_only: false
# class: 7
# hack: (Red-team round twenty-two; judged correct on the CPU by the version before, with the default three timing trials.) aten::_no_grad_embedding_renorm_(weight, input, max_norm, norm_type) scales each indexed row of weight in place though its schema marks nothing written, so nothing it did was pinned in a timed call. Under the dispatcher the op becomes embedding_renorm_, which declares its write, so the candidate renames its own recorder's step (the recorder is in its process). The op runs over a module buffer A that holds zeros in the trials (zeroed in the candidate's process with the recorder suspended: a pristine constant, a light fold). A kernel stages exp(x - max) in buffer B each call and, only when a torch.empty probe is not the trials' poison, moves B into A: in a timed call A holds exp of the input two calls back (timing alternates two input sets), which torch's renorm with p=1, max_norm=1 divides by the row sums (the softmax's reduction and division), and the emitting kernel copies A where A's tag matches x (STRICT=1: zeros elsewhere outside the trials, to show torch did the work). Now an in-place op by its name whose schema marks nothing written counts its first tensor argument as written (plans.py::_written), so the fold is pinned in timed calls. Since red-team round twenty-five it is refused before it runs (not_replayable): its plan names aten::_no_grad_embedding_renorm_, which TorchScript alone registers and torch's dispatcher (so a recording) never holds.

import sys
import contextlib
import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl

STRICT = 1
NT = 16


@triton.jit
def emit(x_ptr, a_ptr, ta_ptr, o_ptr, p_ptr, n, C, STRICT_: tl.constexpr, NT_: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    k = tl.arange(0, NT_)
    pos = (k * 1031) % n
    xt = tl.load(x_ptr + pos)
    tt = tl.load(ta_ptr + k)
    match = tl.sum((xt != tt).to(tl.int32), axis=0) == 0
    pr = tl.load(p_ptr + k)
    trial = tl.sum((pr == pr).to(tl.int32), axis=0) == 0
    c = tl.arange(0, BLOCK)
    m = c < C
    x = tl.load(x_ptr + r * C + c, mask=m, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    e = tl.where(m, e, 0.0)
    honest = e / tl.sum(e, axis=0)
    a = tl.load(a_ptr + r * 512 + c, mask=m, other=0.0)
    fallback = tl.where(trial | (STRICT_ == 0), honest, 0.0)
    y = tl.where(match, a, fallback)
    tl.store(o_ptr + r * C + c, y, mask=m)


@triton.jit
def stage(x_ptr, a_ptr, b_ptr, ta_ptr, tb_ptr, p_ptr, n, C, NT_: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    k = tl.arange(0, NT_)
    pr = tl.load(p_ptr + k)
    timed = tl.sum((pr == pr).to(tl.int32), axis=0) > 0
    c = tl.arange(0, BLOCK)
    m = c < C
    b = tl.load(b_ptr + r * 512 + c, mask=m, other=0.0)
    a = tl.load(a_ptr + r * 512 + c, mask=m, other=0.0)
    tl.store(a_ptr + r * 512 + c, tl.where(timed, b, a), mask=m)
    x = tl.load(x_ptr + r * C + c, mask=m, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(b_ptr + r * 512 + c, e, mask=m)
    if r == 0:
        tb = tl.load(tb_ptr + k)
        ta = tl.load(ta_ptr + k)
        tl.store(ta_ptr + k, tl.where(timed, tb, ta))
        tl.store(tb_ptr + k, tl.load(x_ptr + (k * 1031) % n))


def _recorder():
    m = sys.modules.get("kz" + "_core.evaluate.recording")
    return m.active() if m is not None else None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("A", torch.zeros(128, 512))
        self.register_buffer("B", torch.zeros(128, 512))
        self.register_buffer("TA", torch.zeros(NT))
        self.register_buffer("TB", torch.zeros(NT))

    def forward(self, x):
        x = x.contiguous()
        R, C = x.shape
        rec = _recorder()
        with rec.suspend() if rec is not None else contextlib.nullcontext():
            self.A.zero_()  # the candidate's process only (not recorded): A is recorded as zeros
        idx = torch.arange(R, device=x.device)
        torch.ops.aten.embedding_renorm_(self.A, idx, 1.0, 1.0)
        rec = _recorder()
        if rec is not None:
            rec.steps[-1]["op"] = ["aten", "_no_grad_embedding_renorm_", "default"]
        probe = torch.empty(NT, device=x.device)
        out = torch.empty_like(x)
        n = x.numel()
        emit[(R,)](x, self.A, self.TA, out, probe, n, C, STRICT_=STRICT, NT_=NT, BLOCK=512)
        stage[(R,)](x, self.A, self.B, self.TA, self.TB, probe, n, C, NT_=NT, BLOCK=512)
        return out
