"""kz-backend-cuda: registration and static checks (source text only)."""

from __future__ import annotations

import ast

import pytest

from kz_core.model import Candidate, Problem
from kz_core.plugins import backends, get_plugin_manager

from kz_backend_cuda.checks import check_cuda_source

INLINE = '''
import torch
from torch.utils.cpp_extension import load_inline

cuda_source = """
__global__ void add_kernel(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
torch::Tensor add(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    int n = a.numel();
    add_kernel<<<(n + 255) / 256, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""
module = load_inline(name="add", cpp_sources="torch::Tensor add(torch::Tensor a, torch::Tensor b);", cuda_sources=cuda_source, functions=["add"])


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        return module.add(a, b)
'''


def test_register_backends_adds_cuda_and_cuda_inline():
    registered = backends()
    assert registered["cuda"].language == registered["cuda_inline"].language == "cuda"
    assert not registered["cuda"].runs_on_cpu


def test_static_checks_pass_a_load_inline_candidate():
    assert check_cuda_source(INLINE, "cuda_inline") == []


def test_static_checks_reject_source_without_a_global_function():
    code = INLINE.replace("__global__", "__device__")
    assert [f.check for f in check_cuda_source(code, "cuda_inline")] == ["no_cuda_kernel"]


def test_static_checks_require_load_inline_for_cuda_inline_only():
    code = INLINE.replace("load_inline(", "compile_somehow(")
    assert [f.check for f in check_cuda_source(code, "cuda_inline")] == ["no_load_inline"]
    assert [f.check for f in check_cuda_source(code, "cuda")] == []


@pytest.mark.parametrize(
    "spelling",
    [
        "from torch.utils.cpp_extension import load_inline as _load_inline\n_load_inline(",
        "import torch.utils.cpp_extension as ext\next.load_inline(",
        "from torch.utils import cpp_extension\nbuild = cpp_extension.load_inline\nbuild(",
    ],
)
def test_load_inline_under_another_name_is_load_inline(spelling):
    """Written against the version before, which looked for a call named ``load_inline``
    only: a published pipeline's template that imports it as ``_load_inline`` was
    ``no_load_inline``, though kz replaces the function the alias names before the
    candidate's module runs."""
    imports, call = spelling.rsplit("\n", 1)
    code = imports + "\n" + INLINE.replace("module = load_inline(", "module = " + call, 1)
    assert call in code and ast.parse(code)
    assert check_cuda_source(code, "cuda_inline") == []
    assert [f.check for f in check_cuda_source(code.replace(call, "compile_somehow("), "cuda_inline")] == ["no_load_inline"]


def test_static_checks_hook_answers_only_for_cuda_backends():
    pm = get_plugin_manager()
    problem = Problem(name="p", code="")
    for backend, expected in (("cuda", {"no_cuda_kernel"}), ("cuda_inline", {"no_cuda_kernel", "no_load_inline"}), ("triton", set())):
        found = {f.check for group in pm.hook.static_checks(candidate=Candidate("p", backend, "x = 1"), problem=problem) for f in group}
        assert expected <= found
        if not expected:
            assert not found & {"no_cuda_kernel", "no_load_inline"}
