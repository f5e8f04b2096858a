# problem: 3_row_softmax
# style: Inductor-generated persistent softmax as KernelBook publishes it: `triton_helpers.max2` (a `tl.reduce` whose combine function is Inductor's own `maximum`), `tl_math.exp`, `tl.where(xmask, ..., float("-inf"))`, the `tmp` chain and a `call(args)` with `empty_strided`; under Triton's CPU interpreter such a reduction ran its combine once per element and took more than the 300 s an evaluation call may take (over-rejection probe 20)

import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch._inductor.runtime import triton_helpers
from torch._inductor.runtime.triton_helpers import math as tl_math


@triton.jit
def triton_per_fused__softmax_0(in_ptr0, out_ptr2, xnumel, r0_numel, XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_index = tl.arange(0, R0_BLOCK)[None, :]
    r0_mask = r0_index < r0_numel
    r0_1 = r0_index
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (r0_1 + r0_numel * x0), r0_mask & xmask, other=0.0)
    tmp1 = tl.broadcast_to(tmp0, [XBLOCK, R0_BLOCK])
    tmp3 = tl.where(r0_mask & xmask, tmp1, float("-inf"))
    tmp4 = triton_helpers.max2(tmp3, 1)[:, None]
    tmp5 = tmp0 - tmp4
    tmp6 = tl_math.exp(tmp5)
    tmp7 = tl.broadcast_to(tmp6, [XBLOCK, R0_BLOCK])
    tmp9 = tl.where(r0_mask & xmask, tmp7, 0)
    tmp10 = tl.sum(tmp9, 1)[:, None]
    tmp11 = tmp6 / tmp10
    tl.store(out_ptr2 + (r0_1 + r0_numel * x0), tmp11, r0_mask & xmask)


def call(args):
    arg0_1, = args
    args.clear()
    s0, s1 = arg0_1.shape
    buf2 = torch.empty_strided((s0, s1), (s1, 1), device=arg0_1.device, dtype=torch.float32)
    triton_per_fused__softmax_0[(triton.cdiv(s0, 4),)](arg0_1, buf2, s0, s1, XBLOCK=4, R0_BLOCK=triton.next_power_of_2(s1))
    del arg0_1
    return (buf2,)


class ModelNew(nn.Module):
    def forward(self, input_0):
        return call([input_0])[0]
