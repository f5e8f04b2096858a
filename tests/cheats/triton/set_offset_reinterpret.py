# problem: 2_scaled_relu
# expect: runtime_error
# check: not_replayable
# gpu_only: false
# class: 7
# hack: bytes reinterpreted through aten::set_.source_Tensor_storage_offset, which changes dtype (set_.source_Tensor refuses): a step the candidate writes into its own plan takes each float's top byte as int8, widens it to int16 (sign extension) and takes the high byte back the same way, a -1/0 mask made a float. Only view and view_as_real/complex were reinterpretations to the version before, which judged it correct; any result on the storage of a tensor the op read, in another dtype, is one now. Since red-team round twenty-four it is refused before it runs (not_replayable): its plan names aten::set_.source_Tensor_storage_offset, a composite operator, which a plan may not name.

# hack (red team): x's bytes reinterpreted as int8 by aten::set_.source_Tensor_storage_offset
# (torch lets that overload change dtype; only aten::view / view_as_real / view_as_complex
# taint), widened int8->int16 (sign extension), the int16 result reinterpreted as int8 the
# same way and its high byte (-1 if x < 0 else 0) made a float: the sign test is torch's.
import sys
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def fma_kernel(x_ptr, m_ptr, o_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    m = tl.load(m_ptr + offs, mask=mask)
    tl.store(o_ptr + offs, (x + x * m) * scale, mask=mask)


def _recorder():
    m = sys.modules.get("kz" + "_core.evaluate.recording")
    return m.active() if m is not None else None


def as_dtype(src, dtype, offset, size, stride):
    """aten::set_.source_Tensor_storage_offset(empty(0, dtype), src, ...) recorded as itself."""
    op = torch.ops.aten.set_.source_Tensor_storage_offset
    base = torch.empty(0, dtype=dtype, device=src.device)
    recorder = _recorder()
    if recorder is None:
        return op(base, src, offset, size, stride)
    with recorder.suspend():
        result = op(base, src, offset, size, stride)
    step = {"kind": "op", "op": ["aten", "set_", "source_Tensor_storage_offset"], "args": [recorder.ref(base), recorder.ref(src), offset, list(size), list(stride)], "kwargs": {}}
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
        top = as_dtype(flat, torch.int8, 3, (n,), (4,))   # each float's top byte, as int8
        wide = top.to(torch.int16)                                                         # sign extension
        high = as_dtype(wide, torch.int8, 1, (n,), (2,))  # high byte: -1 or 0
        m = high.to(torch.float32)
        out = torch.empty_like(flat)
        fma_kernel[(triton.cdiv(n, 1024),)](flat, m, out, n, self.scale, BLOCK=1024)
        return out.view(x.shape)

