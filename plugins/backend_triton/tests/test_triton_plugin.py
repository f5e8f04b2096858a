"""kz-backend-triton: registration and static checks (source text only)."""

from __future__ import annotations

from kz_core.model import Candidate, Problem, Severity
from kz_core.plugins import backends, get_plugin_manager

from kz_backend_triton.checks import check_triton_source

GOOD = '''
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
        return out
'''


def checks(code):
    return [(f.check, f.severity) for f in check_triton_source(code)]


def test_register_backends_adds_triton():
    info = backends()["triton"]
    assert info.language == "triton" and info.runs_on_cpu


def test_static_checks_pass_a_real_kernel():
    assert checks(GOOD) == []


def test_static_checks_reject_a_candidate_without_kernels():
    code = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x, y):\n        return x + y\n"
    assert checks(code) == [("no_triton_kernel", Severity.ERROR)]


def test_a_candidate_of_another_backend_is_told_which_backend_to_name():
    """``kz eval -c <folder of load_inline candidates>`` without ``--backend`` judged them as
    Triton (the default) and said only that no Triton kernel was defined."""
    from kz_backend_triton.checks import check_triton_source

    inline = "from torch.utils.cpp_extension import load_inline\nmodule = load_inline(name='m', cpp_sources='', cuda_sources='')\n"
    [finding] = check_triton_source(inline)
    assert finding.check == "no_triton_kernel" and "--backend cuda_inline" in finding.message
    [finding] = check_triton_source('SOURCE = r"""extern "C" __global__ void k(float* x) {}"""\n')
    assert "--backend cuda" in finding.message and "cuda_inline" not in finding.message
    [finding] = check_triton_source("import torch\n")
    assert "--backend" not in finding.message


def test_static_checks_warn_about_a_dead_kernel():
    code = GOOD.replace("add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)", "out = x + y")
    findings = check_triton_source(code)
    assert [(f.check, f.severity) for f in findings] == [("kernel_not_launched", Severity.WARNING)]
    assert findings[0].line == 8  # the def line


def test_static_checks_accept_spellings_and_device_functions():
    code = GOOD.replace("@triton.jit", "@triton.jit(do_not_specialize=['n'])")
    code = code.replace("import triton.language as tl", "import triton.language as tl\nfrom triton import jit\n\n@jit\ndef helper(x):\n    return x\n")
    code = code.replace("tl.load(x_ptr + offsets, mask=mask) +", "helper(tl.load(x_ptr + offsets, mask=mask)) +")
    assert checks(code) == []


def test_static_checks_leave_syntax_errors_to_the_core():
    assert checks("def broken(:") == []


def test_static_checks_hook_answers_only_for_triton():
    pm = get_plugin_manager()
    problem = Problem(name="p", code="")
    code = "x = 1"
    triton_findings = [f.check for group in pm.hook.static_checks(candidate=Candidate("p", "triton", code), problem=problem) for f in group]
    other_findings = [f.check for group in pm.hook.static_checks(candidate=Candidate("p", "elsewhere", code), problem=problem) for f in group]
    assert "no_triton_kernel" in triton_findings
    assert "no_triton_kernel" not in other_findings


def test_a_combine_function_given_to_a_scan_is_not_a_dead_kernel():
    """Written against the version before, which warned ``kernel_not_launched`` for a
    published cumsum's ``@triton.jit`` combine function, passed to
    ``tl.associative_scan`` by name and never called or launched itself."""
    code = GOOD.replace("import triton.language as tl", "import triton.language as tl\n\n@triton.jit\ndef add_fn(a, b):\n    return a + b\n")
    code = code.replace("tl.load(x_ptr + offsets, mask=mask) +", "tl.associative_scan(tl.load(x_ptr + offsets, mask=mask), 0, add_fn) +")
    assert "add_fn)" in code and checks(code) == []


def test_a_kernel_chosen_into_a_variable_is_not_a_dead_kernel():
    """Written against the version before, which warned ``kernel_not_launched`` for both
    kernels of ``kernel = safe_kernel if big else fast_kernel`` followed by
    ``kernel[grid](...)``: a kernel the module names is launched through an alias."""
    code = GOOD.replace("add_kernel[(triton.cdiv(x.numel(), 1024),)]", "launch = add_kernel\n        launch[(triton.cdiv(x.numel(), 1024),)]")
    assert "launch = add_kernel" in code and checks(code) == []


def test_a_kernel_made_by_calling_triton_jit_is_a_kernel():
    """Written against the version before, which counted decorated functions only:
    ``add_kernel = triton.jit(_add)`` was ``no_triton_kernel``."""
    code = GOOD.replace("@triton.jit\ndef add_kernel(", "def _add(").replace(
        "class ModelNew", "add_kernel = triton.jit(_add)\n\n\nclass ModelNew")
    assert "def _add(" in code and "triton.jit(_add)" in code
    assert checks(code) == []
    tuned = code.replace("triton.jit(_add)", "triton.autotune(configs=[], key=['n'])(triton.jit(debug=False)(_add))")
    assert checks(tuned) == []


def test_jit_aliases_class_attributes_and_tables_are_kernels():
    """Written against the version before (over-rejection probe 9), which knew only fixed
    spellings and module-level ``k = triton.jit(fn)``: ``import triton as tr`` with
    ``@tr.jit``, ``from triton import jit as triton_jit``, ``jit = triton.jit``, a class
    attribute ``add = triton.jit(_add)`` and ``{"add": triton.jit(_add)}`` were all
    ``no_triton_kernel``, though the trusted extraction builds (or now builds) them."""
    import_as = GOOD.replace("import triton\n", "import triton as tr\n").replace("@triton.jit", "@tr.jit").replace("triton.cdiv", "tr.cdiv")
    assert "@tr.jit" in import_as and checks(import_as) == []
    from_as = GOOD.replace("@triton.jit", "from triton import jit as triton_jit\n\n\n@triton_jit")
    assert "@triton_jit" in from_as and checks(from_as) == []
    alias = GOOD.replace("@triton.jit", "my_jit = triton.jit\n\n\n@my_jit")
    assert "@my_jit" in alias and checks(alias) == []
    plain = GOOD.replace("@triton.jit\ndef add_kernel(", "def _add(")
    in_class = plain.replace("class ModelNew", "class Ops:\n    add = triton.jit(_add)\n\n\nclass ModelNew").replace(
        "add_kernel[", "Ops.add[")
    assert "Ops.add[" in in_class and checks(in_class) == []
    table = plain.replace("class ModelNew", 'KERNELS = {"add": triton.jit(_add)}\n\n\nclass ModelNew').replace(
        "add_kernel[", 'KERNELS["add"][')
    assert 'KERNELS["add"][' in table and checks(table) == []
    assert checks(plain) == [("no_triton_kernel", Severity.ERROR)]
