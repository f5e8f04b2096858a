# problem: 4_row_sum
# style: KernelBook's Inductor wrapper around a looped reduction: the output made with `empty_strided_cuda` from `torch._C._dynamo.guards` (no dispatcher; the CPU's allocator where no GPU is) as a flat buffer with an offset of one element into a larger one, returned as `reinterpret_tensor(buf, (rows, 1), (1, 1), 1)`, which moves the view's storage offset on

import torch
import torch.nn as nn
import triton
import triton.language as tl

empty_strided_cuda = torch._C._dynamo.guards._empty_strided_cuda if torch.cuda.is_available() else torch._C._dynamo.guards._empty_strided_cpu
reinterpret_tensor = torch._C._dynamo.guards._reinterpret_tensor


@triton.jit
def triton_red_fused_sum_0(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    x0 = xindex
    _tmp2 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    for r0_offset in range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        tmp0 = tl.load(in_ptr0 + (r0_index + r0_numel * x0), r0_mask & xmask, eviction_policy="evict_first", other=0.0)
        tmp1 = tl.broadcast_to(tmp0, [XBLOCK, R0_BLOCK])
        _tmp2 = tl.where(r0_mask & xmask, _tmp2 + tmp1, _tmp2)
    tmp2 = tl.sum(_tmp2, 1)[:, None]
    tl.store(out_ptr0 + (1 + x0), tmp2, xmask)


def call(args):
    arg0_1, = args
    args.clear()
    s0, s1 = arg0_1.shape
    buf0 = empty_strided_cuda((s0 + 1,), (1,), torch.float32)
    triton_red_fused_sum_0[(triton.cdiv(s0, 8),)](arg0_1, buf0, s0, s1, XBLOCK=8, R0_BLOCK=1024, num_warps=8, num_stages=1)
    del arg0_1
    return (reinterpret_tensor(buf0, (s0, 1), (1, 1), 1),)


class ModelNew(nn.Module):
    def forward(self, input_0):
        return call([input_0])[0]
