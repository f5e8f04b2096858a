# problem: 4_row_sum
# expect: runtime_error
# check: not_replayable
# gpu_only: false
# class: 7
# hack: (Red-team round twenty-four; judged correct on the CPU by the version before, with the default three timing trials.) aten::instance_norm(input, weight, bias, running_mean, running_var, use_input_stats=True, momentum=1.0, ...) writes the per-channel means into running_mean in place though its schema marks nothing written: it is a composite operator, whose write happens inside (through native_batch_norm), so no rule of plans.py::_written saw it. The recorder sees it decomposed, so the candidate forges the step into its own recorder (the recorder is in its process). The op runs over a module buffer A that holds zeros in the trials (a pristine constant, a light fold); a kernel moves the input into A only when a torch.empty probe is not the trials' poison, so in a timed call A holds the input of two calls back (timing alternates two input sets), torch computes its row means into running_mean, and the emitting kernel multiplies them by the row length where A's tag matches x (STRICT=1: zeros elsewhere outside the trials, to show torch did the work). Now a plan may not name a composite operator (plans.resolve_operator), and a recording decomposes one even where the dispatcher hands it whole (under torch.inference_mode).

import sys
import contextlib
import torch
import torch.nn as nn
import triton
import triton.language as tl

STRICT = 1
NT = 16
W = 4096
MAXR = 64


@triton.jit
def emit(x_ptr, rm_ptr, ta_ptr, o_ptr, p_ptr, n, C, STRICT_: tl.constexpr, NT_: tl.constexpr, W_: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    k = tl.arange(0, NT_)
    pos = (k * 1031) % n
    xt = tl.load(x_ptr + pos)
    tt = tl.load(ta_ptr + k)
    match = tl.sum((xt != tt).to(tl.int32), axis=0) == 0
    pr = tl.load(p_ptr + k)
    trial = tl.sum((pr == pr).to(tl.int32), axis=0) == 0
    rm = tl.load(rm_ptr + r)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    need = (match == 0) & (trial | (STRICT_ == 0))
    if need:
        for start in range(0, C, BLOCK):
            c = start + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + r * C + c, mask=c < C, other=0.0)
    honest = tl.sum(acc, axis=0)
    y = tl.where(match, rm * W_, honest)
    tl.store(o_ptr + r, y)


@triton.jit
def stage(x_ptr, a_ptr, b_ptr, ta_ptr, tb_ptr, p_ptr, rv_ptr, n, C, NT_: tl.constexpr, W_: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    k = tl.arange(0, NT_)
    pr = tl.load(p_ptr + k)
    timed = tl.sum((pr == pr).to(tl.int32), axis=0) > 0
    for start in range(0, C, BLOCK):
        c = start + tl.arange(0, BLOCK)
        m = c < C
        b = tl.load(b_ptr + r * W_ + c, mask=m, other=0.0)
        a = tl.load(a_ptr + r * W_ + c, mask=m, other=0.0)
        tl.store(a_ptr + r * W_ + c, tl.where(timed, b, a), mask=m)
        x = tl.load(x_ptr + r * C + c, mask=m, other=0.0)
        tl.store(b_ptr + r * W_ + c, x, mask=m)
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
        self.register_buffer("A", torch.zeros(MAXR, W))
        self.register_buffer("B", torch.zeros(MAXR, W))
        self.register_buffer("RM", torch.zeros(MAXR))
        self.register_buffer("RV", torch.zeros(MAXR))
        self.register_buffer("TA", torch.zeros(NT))
        self.register_buffer("TB", torch.zeros(NT))

    def forward(self, x):
        x = x.contiguous()
        R, C = x.shape
        rec = _recorder()
        with rec.suspend() if rec is not None else contextlib.nullcontext():
            self.A.zero_()
            self.RM.zero_()
            self.RV.zero_()
        a3 = self.A.view(1, MAXR, W)
        args = [a3, None, None, self.RM, self.RV, True, 1.0, 1e-5, False]
        if rec is not None:
            enc = rec.encode(list(args))
            with rec.suspend():
                y = torch.ops.aten.instance_norm.default(*args)
            rec.steps.append({"kind": "op", "op": ["aten", "instance_norm", "default"], "args": enc, "kwargs": {}, "out": rec._bind_outputs(y)})
        else:
            y = torch.ops.aten.instance_norm.default(*args)
        probe = torch.empty(NT, device=x.device)
        out = torch.empty(R, 1, device=x.device, dtype=x.dtype)
        n = x.numel()
        emit[(R,)](x, self.RM, self.TA, out, probe, n, C, STRICT_=STRICT, NT_=NT, W_=W, BLOCK=1024)
        stage[(R,)](x, self.A, self.B, self.TA, self.TB, probe, self.RV, n, C, NT_=NT, W_=W, BLOCK=1024)
        return out
