# problem: 2_scaled_relu
# expect: runtime_error
# check: runtime_error|not_replayable
# gpu_only: false
# class: 7
# hack: relu done by torch's quantizer inside aten::copy_ (a moving op by name): a one-element qint32 tensor from _make_per_tensor_quantized_tensor (host arithmetic: input-free, one element) is resized to n and x copied into it, which quantizes with zero point -2^31 and so clamps every negative x to the minimum; a set_ step the candidate writes into its own plan views the quantized memory as int32, and the kernel only dequantizes and scales. Judged correct by the version before; a plan's values are never quantized, nor of a dtype plans may not name.

import sys
import torch
import torch.nn as nn
import triton
import triton.language as tl

SHIFT = 23


@triton.jit
def dequant_scale_kernel(q_ptr, o_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    q = tl.load(q_ptr + offs, mask=mask).to(tl.int64) + 2147483648
    tl.store(o_ptr + offs, q.to(tl.float32) * (1.0 / 8388608.0) * scale, mask=mask)


def _recorder():
    m = sys.modules.get("kz" + "_core.evaluate.recording")
    return m.active() if m is not None else None


def int_view(q, n, device):
    """aten::set_.source_Tensor_storage_offset(int32 empty, q, 0, [n], [1]), recorded as itself."""
    op = torch.ops.aten.set_.source_Tensor_storage_offset
    recorder = _recorder()
    base = torch.empty(0, dtype=torch.int32, device=device)
    if recorder is None:
        return op(base, q, 0, [n], [1])
    with recorder.suspend():
        result = op(base, q, 0, [n], [1])
    step = {"kind": "op", "op": ["aten", "set_", "source_Tensor_storage_offset"], "args": [recorder.ref(base), recorder.ref(q), 0, [n], [1]], "kwargs": {}}
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
        seed = torch.zeros(1, dtype=torch.int32, device=x.device)
        q = torch._make_per_tensor_quantized_tensor(seed, 2.0 ** -SHIFT, -2 ** 31)
        q.resize_(n)
        q.copy_(flat)  # quantize: round(x * 2^23) - 2^31, clamped at -2^31 (relu)
        ints = int_view(q, n, x.device)
        out = torch.empty(n, dtype=flat.dtype, device=x.device)
        dequant_scale_kernel[(triton.cdiv(n, 1024),)](ints, out, n, self.scale, BLOCK=1024)
        return out.view(x.shape)
