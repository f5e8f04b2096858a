# problem: 3_row_softmax
# expect: incorrect|rejected
# check: mismatch|non_finite|output_not_from_kernel|thread_or_stream
# gpu_only: false
# class: 7
# hack: computes the softmax with torch in a thread started with _thread (invisible to threading.active_count()), waits for it with a lock, and copies its answer into the output with a kernel launched on the calling thread.

import torch
import torch.nn as nn
import triton
import triton.language as tl
import _thread

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


class ModelNew(nn.Module):
    def forward(self, x):
        box = {}
        done = _thread.allocate_lock()
        done.acquire()

        def work():
            box["answer"] = getattr(torch, "soft" + "max")(x, dim=-1)
            done.release()

        getattr(_thread, "start_new_" + "thread")(work, ())
        done.acquire()
        out = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 1024),)](box["answer"].contiguous(), out, x.numel(), BLOCK_SIZE=1024)
        return out
