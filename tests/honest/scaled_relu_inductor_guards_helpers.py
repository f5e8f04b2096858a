# problem: 2_scaled_relu
# style: KernelBook's and KernelLLM's Inductor wrapper: `empty_strided_cuda` and `reinterpret_tensor` bound from `torch._C._dynamo.guards` (helpers that make tensors without torch's dispatcher; the CPU's allocator where no GPU is), `assert_size_stride`, a flat buffer viewed back to the input's shape, `triton_helpers.maximum` and the `tmp` chain; a recording saw neither tensor and took both for constants, so this kernel was rejected as writing nothing

import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch._inductor.runtime import triton_helpers

assert_size_stride = torch._C._dynamo.guards.assert_size_stride
empty_strided_cuda = torch._C._dynamo.guards._empty_strided_cuda if torch.cuda.is_available() else torch._C._dynamo.guards._empty_strided_cpu
reinterpret_tensor = torch._C._dynamo.guards._reinterpret_tensor


@triton.jit
def triton_poi_fused_mul_relu_0(in_ptr0, out_ptr0, scale, xnumel, XBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + x0, xmask)
    tmp1 = tl.full([1], 0, tl.int32)
    tmp2 = triton_helpers.maximum(tmp1, tmp0)
    tmp3 = tmp2 * scale
    tl.store(out_ptr0 + x0, tmp3, xmask)


def call(args, scale):
    arg0_1, = args
    args.clear()
    s0, s1 = arg0_1.shape
    assert_size_stride(arg0_1, (s0, s1), (s1, 1))
    buf0 = empty_strided_cuda((s0 * s1,), (1,), torch.float32)
    xnumel = s0 * s1
    triton_poi_fused_mul_relu_0[(triton.cdiv(xnumel, 256),)](arg0_1, buf0, scale, xnumel, XBLOCK=256, num_warps=4, num_stages=1)
    del arg0_1
    return (reinterpret_tensor(buf0, (s0, s1), (s1, 1), 0),)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, input_0):
        return call([input_0], self.scale)[0]
