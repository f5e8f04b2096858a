# problem: 2_scaled_relu
# style: Inductor-generated code as KernelBook and KernelLLM publish it: `triton_helpers.maximum` from `torch._inductor.runtime.triton_helpers` (and its `math as tl_math`) inside the kernel, a `call(args)` function that clears its argument list, a `tmp` chain with `tl.full([1], 0, tl.int32)` and `tl.arange(0, XBLOCK)[:]`

import torch
import triton
import triton.language as tl
from torch._inductor.runtime import triton_helpers
from torch._inductor.runtime.triton_helpers import math as tl_math
import torch.nn as nn


@triton.jit
def triton_poi_fused_abs_mul_relu_0(in_ptr0, out_ptr0, ks0, xnumel, XBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + x0, xmask)
    tmp1 = tl.full([1], 0, tl.int32)
    tmp2 = triton_helpers.maximum(tmp1, tmp0)
    tmp3 = tl_math.abs(tmp2)
    tmp4 = tmp3 * ks0
    tl.store(out_ptr0 + x0, tmp4, xmask)


def call(args):
    arg0_1, ks0 = args
    args.clear()
    arg0_1 = arg0_1.contiguous()
    xnumel = arg0_1.numel()
    buf0 = torch.empty_strided(arg0_1.size(), arg0_1.stride(), device=arg0_1.device, dtype=arg0_1.dtype)
    triton_poi_fused_abs_mul_relu_0[(triton.cdiv(xnumel, 256),)](arg0_1, buf0, ks0, xnumel, XBLOCK=256, num_warps=4, num_stages=1)
    del arg0_1
    return (buf0,)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, input_0):
        output = call([input_0, self.scale])
        return output[0]
