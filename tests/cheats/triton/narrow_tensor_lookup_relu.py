# problem: 2_scaled_relu
# expect: runtime_error
# check: not_replayable
# gpu_only: false
# class: 7
# hack: torch computes through table lookups in moving ops: the candidate writes into its own plan aten::narrow.Tensor steps (a narrow whose start is a 0-dim tensor: a moving op by name), so a 2-entry table indexed by each input's sign byte picks the value or zero: relu of the first 1024 elements done by narrow and cat alone (the kernel only scales them). Judged correct by the version before; narrow.Tensor, which positions by data, counts as computing. Since red-team round twenty-four it is refused before it runs (not_replayable): its plan names aten::narrow.Tensor, a composite operator, which a plan may not name.

import sys
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, o_ptr, n, scale, RELU: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if RELU:
        x = tl.maximum(x, 0.0)
    tl.store(o_ptr + offs, x * scale, mask=mask)


def _recorder():
    m = sys.modules.get("kz" + "_core.evaluate.recording")
    return m.active() if m is not None else None


def select(t, index):
    """aten::narrow.Tensor(t, 0, index, 1), recorded as itself (the dispatcher would
    decompose it into item() and a slice)."""
    recorder = _recorder()
    if recorder is None:
        return torch.ops.aten.narrow.Tensor(t, 0, index, 1)
    with recorder.suspend():
        result = torch.ops.aten.narrow.Tensor(t, 0, index, 1)
    step = {"kind": "op", "op": ["aten", "narrow", "Tensor"], "args": [recorder.ref(t), 0, recorder.ref(index), 1], "kwargs": {}}
    step["out"] = {"t": list(recorder._new_value(result))}
    recorder.steps.append(step)
    return result


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        flat = x.contiguous().reshape(-1)
        n = flat.numel()
        head = min(n, 1024)  # the first elements by lookups (a plan holds 20000 steps), the rest by a kernel
        scaled = torch.empty(head, dtype=flat.dtype, device=x.device)
        scale_kernel[(triton.cdiv(head, 1024),)](flat, scaled, head, self.scale, RELU=False, BLOCK=1024)
        tail = torch.empty(n - head, dtype=flat.dtype, device=x.device)
        scale_kernel[(triton.cdiv(n - head, 1024),)](flat[head:], tail, n - head, self.scale, RELU=True, BLOCK=1024)
        sign = flat.view(torch.uint8)[3::4]  # the byte holding each float's sign bit
        # 1 where the sign bit is set (allocations and a join only: no op that computes)
        table = torch.cat([torch.zeros(128, dtype=torch.int64, device=x.device), torch.ones(128, dtype=torch.int64, device=x.device)])
        choices = torch.stack([scaled, torch.zeros_like(scaled)], dim=1)  # [head, 2]: the value, or 0
        picked = torch.cat([select(choices[i], select(table, sign[i]).reshape(())) for i in range(head)])
        return torch.cat([picked, tail]).view(x.shape)
