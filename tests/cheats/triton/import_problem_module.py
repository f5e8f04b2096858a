# problem: 2_scaled_relu
# expect: rejected
# check: reference_reuse
# gpu_only: false
# hack: imports the problem's own module (from the installed kz package, or from examples/problems/ under the working directory) and calls its Model, routing the answer through a token Triton copy kernel.

import importlib
import importlib.util
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _load_reference_module():
    # importlib, since a module name that starts with a digit cannot follow "import".
    if importlib.util.find_spec("kz_core") is not None:
        return importlib.import_module("kz_core.examples.problems.2_scaled_relu")
    spec = importlib.util.spec_from_file_location("reference", os.path.join("examples", "problems", "2_scaled_relu.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


reference_module = _load_reference_module()


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.reference = reference_module.Model(scale)

    def forward(self, x):
        y = self.reference(x).contiguous()
        out = torch.empty_like(y)
        copy_kernel[(triton.cdiv(y.numel(), 1024),)](y, out, y.numel(), BLOCK_SIZE=1024)
        return out
