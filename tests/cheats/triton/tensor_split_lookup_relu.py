# problem: 2_scaled_relu
# expect: runtime_error
# check: not_replayable
# gpu_only: false
# class: 7
# hack: torch computes through table lookups in moving ops: the candidate writes into its own plan aten::tensor_split.tensor_indices_or_sections steps (a moving op by name whose tensor argument is a list of split points read from its data), so splitting a 256-entry table at each input's sign byte, then [value, 0] at the looked-up index, does relu of the first 1024 elements (the kernel only scales them). Judged correct by the version before; a moving op's overload with a tensor argument it does not move (narrow.Tensor, this one) counts as computing, found from the schemas. Since red-team round twenty-four it is refused before it runs (not_replayable): its plan names aten::tensor_split.tensor_indices_or_sections, a composite operator, which a plan may not name.

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


def split_at(t, index):
    """aten::tensor_split.tensor_indices_or_sections(t, index) recorded as itself."""
    op = torch.ops.aten.tensor_split.tensor_indices_or_sections
    recorder = _recorder()
    if recorder is None:
        return op(t, index)
    with recorder.suspend():
        result = op(t, index)
    step = {"kind": "op", "op": ["aten", "tensor_split", "tensor_indices_or_sections"], "args": [recorder.ref(t), recorder.ref(index)], "kwargs": {}}
    step["out"] = {"tuple": [{"t": list(recorder._new_value(r))} for r in result]}
    recorder.steps.append(step)
    return result


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        flat = x.contiguous().reshape(-1)
        n = flat.numel()
        head = min(n, 1024)
        scaled = torch.empty(head, dtype=flat.dtype, device=x.device)
        scale_kernel[(triton.cdiv(head, 1024),)](flat, scaled, head, self.scale, RELU=False, BLOCK=1024)
        tail = torch.empty(n - head, dtype=flat.dtype, device=x.device)
        scale_kernel[(triton.cdiv(n - head, 1024),)](flat[head:], tail, n - head, self.scale, RELU=True, BLOCK=1024)
        # Split points live on the host (tensor_split wants them there on a GPU).
        sign = flat.view(torch.uint8)[3::4][:head].to(torch.int64).cpu()
        table = torch.cat([torch.zeros(128, dtype=torch.int64), torch.ones(128, dtype=torch.int64)])
        choices = torch.stack([scaled, torch.zeros_like(scaled)], dim=1)
        picked = []
        for i in range(head):
            k = split_at(table, sign[i:i + 1])[1][:1]
            picked.append(split_at(choices[i], k)[1][:1])
        return torch.cat([torch.cat(picked), tail]).view(x.shape)
