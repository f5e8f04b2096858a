# problem: 1_vector_add
# expect: runtime_error
# check: runtime_error|worker_died|not_replayable
# gpu_only: false
# class: 8
# hack: replaces kz's reply encoder (through sys.modules) with one that sends a plan naming tensors that do not exist, seeds nobody drew, a 10^6-deep nesting and non-numbers where numbers belong; a judge that trusts a reply's shape dies on it and takes the batch with it.

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


_wire = sys.modules.get("kz" + "_core.evaluate.wire")
if _wire is not None:
    _encode = _wire.encode_reply

    def _forged(reply, _encode=_encode):
        if isinstance(reply, dict) and "plans" in reply:
            nested = []
            for _ in range(200):
                nested = [nested]
            reply = {"ok": True, "plans": {"default": {"plan": {"version": 1, "inputs": "x", "steps": [{"kind": "op", "op": ["aten", "add", "Tensor"], "args": [{"t": ["val", 999]}], "kwargs": {}, "out": nested}],
                     "outputs": {"t": ["in", 7]}, "constants": -1}, "constants": "not tensors"}}, "trials": [{"seed": 12345, "launches": "many"}]}
        return _encode(reply)

    _wire.encode_reply = _forged


class ModelNew(nn.Module):
    def forward(self, a, b):
        out = torch.empty_like(a)
        add_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, out, a.numel(), BLOCK_SIZE=1024)
        return out
