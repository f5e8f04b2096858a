# problem: 1_vector_add
# expect: runtime_error
# check: worker_died
# gpu_only: false
# class: 8
# hack: A reply's large tensors (here the plan's 2 MiB constant) are copied into a memory file the parent lends with each request, which the parent maps instead of receiving the bytes through the socket. The file is the candidate's process's too: this candidate wraps kz's writer (through sys.modules) and maps the file again, writable, keeping the mapping, so that it could change the plan's constants after the parent read them (a private mapping shows the file's changes until a page is written). The parent seals the file before it reads a byte, which the kernel refuses while a writable mapping exists: the reply is refused as that worker's (kz_core/evaluate/wire.py::LentFile).

import mmap
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(a_ptr, b_ptr, pad_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    total = tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask) + tl.load(pad_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, total, mask=mask)


_wire = sys.modules.get("kz" + "_core.evaluate.wire")
_kept = []
if _wire is not None and hasattr(_wire, "_write_lent"):
    _write = _wire._write_lent

    def _write_and_keep(lent, large):
        used = _write(lent, large)
        if used:
            _kept.append(mmap.mmap(lent.fd, used))  # shared and writable, after kz's own mapping is gone
        return used

    _wire._write_lent = _write_and_keep


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("pad", torch.zeros(1 << 19))  # 2 MiB: its bytes go through the lent file

    def forward(self, a, b):
        out = torch.empty_like(a)
        add_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, self.pad, out, a.numel(), BLOCK_SIZE=1024)
        return out
