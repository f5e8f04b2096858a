# problem: 1_vector_add
# expect: runtime_error
# check: worker_died
# gpu_only: false
# class: 8
# hack: A reply's large tensors (here the plan's 2 MiB constant) are copied into a memory file the parent lends with each request, which the parent maps instead of receiving the bytes through the socket. The file is the candidate's process's too: this candidate wraps kz's LentFile.unmap (through sys.modules), which lets the worker's own mappings of the file go before the reply is sent, and maps the file again, writable, keeping the mapping (the forty-sixth session's version wrapped the copy into the file, which a recording's constants made in the file skip since the forty-seventh), so that it could change the plan's constants after the parent read them (a private mapping shows the file's changes until a page is written). The parent seals the file before it reads a byte, which the kernel refuses while a writable mapping exists: the reply is refused as that worker's (kz_core/evaluate/wire.py::LentFile).

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
if _wire is not None and hasattr(_wire, "LentFile") and hasattr(_wire.LentFile, "unmap"):
    _unmap = _wire.LentFile.unmap

    def _unmap_and_keep(self):
        _unmap(self)
        try:  # shared and writable, after kz's own mappings are gone, before the reply goes
            _kept.append(mmap.mmap(self.fd, mmap.PAGESIZE))
        except (OSError, ValueError):  # (closed, or sealed already: nothing to keep)
            pass

    _wire.LentFile.unmap = _unmap_and_keep


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("pad", torch.zeros(1 << 19))  # 2 MiB: its bytes go through the lent file

    def forward(self, a, b):
        out = torch.empty_like(a)
        add_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, self.pad, out, a.numel(), BLOCK_SIZE=1024)
        return out
