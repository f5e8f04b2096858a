# problem: 5_matmul
# expect: rejected|incorrect
# check: torch_compute_in_forward|no_kernel_launch|mismatch|non_finite|output_not_from_kernel
# gpu_only: false
# class: 1
# hack: returns torch's product through a copy kernel while patching kz's timing (summarize divides every time by 1000, time_forward returns a canned answer) and its reply encoder (every trial reports a launch and no torch operation), all reached through sys.modules.

import torch
import torch.nn as nn
import triton
import triton.language as tl
import sys

@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # a_ptr, b_ptr, out_ptr: contiguous vectors of n_elements; one program adds BLOCK_SIZE of them.
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # Copies n_elements contiguous values: the kernel a cheat launches so that "a kernel ran".
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


for _name, _module in list(sys.modules.items()):
    if _name == "kz" + "_core.evaluate.timing":
        _real = _module.summarize
        _module.summarize = lambda times, clock, calls=1, note="": _real([t / 1000 for t in times], clock, calls, note)
    if _name == "kz" + "_core.evaluate.wire":
        _encode = _module.encode_reply

        def _forged(reply, _encode=_encode):
            if isinstance(reply, dict):
                for trial in reply.get("trials", []):
                    trial["launches"], trial["compute_ops"] = 1, []
                reply["compute_ops"] = []
            return _encode(reply)

        _module.encode_reply = _forged


class ModelNew(nn.Module):
    def forward(self, a, b):
        product = getattr(torch, "mat" + "mul")(a, b)
        out = torch.empty_like(product)
        copy_kernel[(triton.cdiv(out.numel(), 1024),)](product, out, out.numel(), BLOCK_SIZE=1024)
        return out
