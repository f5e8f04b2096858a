"""Trusted kernel extraction: kernels built from a candidate's source without running it.

Triton runs under its interpreter here (``TRITON_INTERPRET=1``, set before triton is imported,
as the evaluator's workers do). Two tests take a fresh process without the interpreter:
one compiles every kernel for an H100/H200 target (no GPU needed), one (``-m gpu``) launches them
on CUDA and compares with the candidate's own module.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import importlib.util  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from kz_backend_triton.trusted import KernelExtractionError, extract_kernels  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((REPO / "examples" / "candidates" / "triton").glob("*.py"))
PROBLEMS = REPO / "examples" / "problems"


def load(path: Path, name: str):
    """Import a file as a fresh module (the test's own, trusted use of the example)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


SOURCE_NAMES = itertools.count()


def extract(code: str) -> dict[str, object]:
    """``extract_kernels`` of a dedented snippet, under a file name of its own."""
    return extract_kernels(textwrap.dedent(code), f"<kz-test-source-{next(SOURCE_NAMES)}>")


def refused(code: str) -> KernelExtractionError:
    with pytest.raises(KernelExtractionError) as info:
        extract(code)
    return info.value


class Recording:
    """Stands in for a module's kernel: counts launches and forwards them to ``kernel``."""

    def __init__(self, kernel):
        self.kernel, self.launches = kernel, 0

    def __getitem__(self, grid):
        self.launches += 1
        return self.kernel[grid]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_examples_give_the_candidates_own_outputs(path, monkeypatch):
    module = load(path, f"kz_test_example_{path.stem}")
    problem = load(PROBLEMS / path.name, f"kz_test_problem_{path.stem}")
    torch.manual_seed(0)
    model = module.ModelNew(*problem.get_init_inputs())
    inputs = problem.get_inputs()
    with torch.no_grad():
        expected = model(*inputs)
        kernels = extract_kernels(path.read_text(), str(path))
        assert kernels and all(type(k).__name__ == "InterpretedFunction" for k in kernels.values())
        recordings = {name: Recording(kernel) for name, kernel in kernels.items()}
        for name, recording in recordings.items():
            assert getattr(module, name) is not recording.kernel
            monkeypatch.setattr(module, name, recording)
        got = model(*inputs)
    assert all(r.launches > 0 for r in recordings.values())
    assert torch.equal(got, expected)
    torch.manual_seed(0)
    reference = problem.Model(*problem.get_init_inputs())
    with torch.no_grad():
        torch.testing.assert_close(got, reference(*inputs), atol=1e-4, rtol=1e-4)
    namespace = next(iter(kernels.values())).fn.__globals__
    for name in ("torch", "nn", "ModelNew", "os", "np", "inspect", "__file__", "__loader__"):
        assert name not in namespace
    assert set(namespace["__builtins__"]) >= {"range", "min", "float"}
    assert "__import__" not in namespace["__builtins__"] and "getattr" not in namespace["__builtins__"]


COPY_KERNEL = """
import triton
import triton.language as tl

@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
"""


def launch_unary(kernel, x, *extra, block=16, **kwargs):
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), block),)](x, out, x.numel(), *extra, BLOCK=block, **kwargs)
    return out


def test_module_constants_are_evaluated_not_executed():
    kernels = extract("""
        import math
        import triton
        import triton.language as tl

        SCALE = 2.0 * 3 - 1          # 5.0
        HALF = 64 // 2 % 7           # 4
        NEG = -HALF
        POW = 2 ** 3
        NAME = "x"
        PAIR = (1, (2, 3))
        NOTHING = None
        FLAG = True
        INF = float("-inf")
        LOG2E = math.log2(math.e)
        C: tl.constexpr = 64
        CE = tl.constexpr(32)
        DTYPE = tl.float16
        TWICE = 1
        TWICE = 2
        NOT_LITERAL = len("abc")

        @triton.jit
        def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n)
            y = x * SCALE + HALF + NEG + POW + LOG2E * 0 + PAIR[1][0] + CE
            tl.store(out_ptr + offs, y, mask=offs < n)
    """)
    g = kernels["k"].fn.__globals__
    assert (g["SCALE"], g["HALF"], g["NEG"], g["POW"], g["NAME"], g["PAIR"]) == (5.0, 4, -4, 8, "x", (1, (2, 3)))
    assert g["NOTHING"] is None and g["FLAG"] is True and g["INF"] == float("-inf")
    assert g["LOG2E"] == pytest.approx(1.4426950408889634) and g["C"] == 64
    assert isinstance(g["CE"], tl.constexpr) and g["CE"].value == 32 and g["DTYPE"] is tl.float16
    assert "TWICE" not in g and "NOT_LITERAL" not in g and "len" not in g
    x = torch.randn(40)
    torch.testing.assert_close(launch_unary(kernels["k"], x), x * 5.0 + 4 - 4 + 8 + 2 + 32)


def test_giant_or_formatted_constants_are_not_bound():
    kernels = extract("""
        import triton
        HUGE = 10 ** 100000
        LONG = "x" * 10 ** 6
        DOUBLED = ("x" * 1000,) * 1000
        FORMATTED = "%s" % ("a",)
        FINE = 2 ** 64

        @triton.jit
        def k(x):
            return x
    """)
    g = kernels["k"].fn.__globals__
    assert {"HUGE", "LONG", "DOUBLED", "FORMATTED"}.isdisjoint(g) and g["FINE"] == 2**64


def test_a_kernel_named_like_an_import_is_refused():
    assert "name of an import" in str(refused("""
        import triton
        from triton.language import core

        @triton.jit
        def core(x):
            return x
    """))


def test_a_kernel_using_a_non_literal_global_is_refused():
    error = refused("""
        import torch
        import triton
        import triton.language as tl
        X = torch.float32

        @triton.jit
        def k(x_ptr):
            tl.store(x_ptr, tl.load(x_ptr).to(X))
    """)
    assert error.line == 9 and "'X' is not available" in str(error)


def test_aliases_helpers_classes_if_blocks_and_jit_arguments():
    kernels = extract("""
        import torch
        import triton as tr
        from triton import language as tl  # the interpreter wants the name tl
        from triton import jit
        from triton.language import core

        @jit
        def helper(x, factor):
            return x * factor

        class Kernels:
            @tr.jit(do_not_specialize=["n"], debug=False)
            def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
                offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                x = tl.load(x_ptr + offs, mask=offs < n)
                tl.store(out_ptr + offs, helper(x, 3.0).to(core.float32), mask=offs < n)

        if torch.cuda.is_available() or True:
            @tr.jit
            def negate(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
                offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                tl.store(out_ptr + offs, -tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        @tr.jit
        def annotated(x: "tl.tensor", y: tl.float32, n: tl.int32 = 3, BLOCK: tl.constexpr = 4) -> None:
            pass
    """)
    # A kernel kept in a class: by its qualified name (the recording's) and its own name.
    assert set(kernels) == {"helper", "Kernels.scale", "scale", "negate", "annotated"}
    assert kernels["Kernels.scale"] is kernels["scale"]
    # annotations are evaluated as in the candidate's module (Triton reads tl.constexpr from them)
    assert kernels["scale"].fn.__annotations__["BLOCK"] is tl.constexpr
    assert kernels["annotated"].fn.__annotations__["y"] is tl.float32
    assert kernels["scale"].kwargs["do_not_specialize"] == ["n"]
    x = torch.randn(37)
    torch.testing.assert_close(launch_unary(kernels["scale"], x), x * 3.0)
    torch.testing.assert_close(launch_unary(kernels["negate"], x), -x)


def test_a_future_import_of_the_candidate_keeps_annotations_as_text():
    kernels = extract("from __future__ import annotations\n" + textwrap.dedent(COPY_KERNEL))
    assert kernels["copy_kernel"].fn.__annotations__["BLOCK"] == "tl.constexpr"
    x = torch.randn(20)
    torch.testing.assert_close(launch_unary(kernels["copy_kernel"], x), x)


def test_autotune_and_heuristics_are_dropped_and_their_arguments_never_run(tmp_path):
    marker = tmp_path / "ran"
    kernels = extract(f"""
        import triton
        import triton.language as tl
        from triton import heuristics

        def configs():
            open({str(marker)!r}, "w").write("configs ran")
            return [triton.Config({{"BLOCK": 64}})]

        @triton.autotune(configs=configs(), key=["n"])
        @heuristics({{"EVEN": lambda args: open({str(marker)!r}, "w")}})
        @triton.jit
        def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)
    """)
    assert type(kernels["k"]).__name__ == "InterpretedFunction"
    x = torch.randn(20)
    torch.testing.assert_close(launch_unary(kernels["k"], x, EVEN=False), x + 1)
    assert not marker.exists()


def test_top_level_code_class_bodies_and_forward_never_run(tmp_path):
    marker = tmp_path / "ran"
    code = (
        f"import builtins\nopen({str(marker)!r}, 'w').write('module ran')\nbuiltins.KZ_TRUSTED_FLAG = True\n"
        + textwrap.dedent(COPY_KERNEL)
        + f"\nclass ModelNew:\n    open({str(marker)!r}, 'w').write('class body ran')\n\n"
        f"    def forward(self, x):\n        open({str(marker)!r}, 'w').write('forward ran')\n\n"
        "raise SystemExit('the module ran')\n"
    )
    kernels = extract_kernels(code, str(tmp_path / "candidate.py"))
    assert set(kernels) == {"copy_kernel"}
    assert not marker.exists() and not hasattr(__import__("builtins"), "KZ_TRUSTED_FLAG")
    x = torch.randn(20)
    torch.testing.assert_close(launch_unary(kernels["copy_kernel"], x), x)


def test_math_builtins_and_triton_values_in_a_body():
    kernels = extract("""
        import math
        import triton
        import triton.language as tl
        from triton.language import PropagateNan
        try:
            from triton.language.extra import libdevice
        except ImportError:
            from triton.language.extra.cuda import libdevice

        @triton.jit
        def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            acc = tl.zeros((BLOCK,), dtype=tl.float32)
            for i in range(0, min(3, max(n, 1))):
                acc += x * math.pi
            if isinstance(BLOCK, int) and BLOCK == 16 and abs(-1) < 2 < 3:
                acc = tl.maximum(acc, acc, propagate_nan=PropagateNan.ALL)
            assert BLOCK > 0, "BLOCK"
            tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=offs < n)
    """)
    assert kernels["k"].fn.__globals__["libdevice"].__name__ == "triton.language.extra.libdevice"
    x = torch.randn(30)
    torch.testing.assert_close(launch_unary(kernels["k"], x), x * math.pi * 3)


def test_libdevice_imports_are_bound():
    kernels = extract("""
        import triton
        import triton.language as tl
        from triton.language.extra import libdevice
        from triton.language.extra.cuda import libdevice as cuda_libdevice
        import triton.language.extra.libdevice as ld
        from triton.language.extra import does_not_exist

        @triton.jit
        def k(x_ptr, out_ptr):
            x = tl.load(x_ptr)
            tl.store(out_ptr, libdevice.tanh(x) + cuda_libdevice.exp(x) + ld.erf(x))
    """)
    g = kernels["k"].fn.__globals__
    assert g["libdevice"].__name__ == "triton.language.extra.libdevice" and g["ld"] is g["libdevice"]
    assert g["cuda_libdevice"].__name__ == "triton.language.extra.cuda.libdevice"
    assert "does_not_exist" not in g


def test_inductors_triton_helpers_are_bound_and_only_their_jit_functions():
    """Inductor-generated kernels (KernelBook, KernelLLM) call ``triton_helpers.maximum``
    and ``tl_math.abs``: refused before (an honest kernel judged compile_error,
    tests/honest/scaled_relu_inductor_helpers.py). Its plain Python functions (a driver
    switch), its ``triton`` and anything of torch stay out of reach."""
    kernels = extract("""
        import torch
        import triton
        import triton.language as tl
        from torch._inductor.runtime import triton_helpers
        from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math, maximum
        import torch._inductor.runtime.triton_helpers as th
        import torch._inductor.runtime.triton_helpers

        @triton.jit
        def k(x_ptr, out_ptr, n, XBLOCK: tl.constexpr):
            xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:]
            xmask = xindex < n
            tmp0 = tl.load(x_ptr + xindex, xmask)
            tmp1 = triton_helpers.maximum(tl.full([1], 0, tl.int32), tmp0)
            tmp2 = th.minimum(maximum(tmp1, tmp1), tl_math.abs(tmp0))
            tl.store(out_ptr + xindex, tmp2, xmask)
    """)
    g = kernels["k"].fn.__globals__
    assert g["triton_helpers"].__name__ == "torch._inductor.runtime.triton_helpers" and g["th"] is g["triton_helpers"]
    assert g["tl_math"].__name__ == "triton.language.math" and g["libdevice"].__name__ == "triton.language.extra.libdevice"
    assert "torch" not in g
    x = torch.tensor([-2.0, -0.5, 0.0, 0.5, 3.0])
    out = torch.empty_like(x)
    kernels["k"][(1,)](x, out, x.numel(), XBLOCK=8)
    assert torch.equal(out, torch.relu(x))
    for attribute in ("set_driver_to_gpu", "get_backend_options", "triton", "warnings", "_log2"):
        error = refused(f"""
            import triton
            from torch._inductor.runtime import triton_helpers

            @triton.jit
            def k(x):
                return triton_helpers.{attribute}
        """)
        assert error.line == 7, (attribute, error)
    error = refused("""
        import triton
        from torch._inductor.runtime.triton_helpers import set_driver_to_gpu

        @triton.jit
        def k(x):
            set_driver_to_gpu()
    """)
    assert error.line == 7 and "'set_driver_to_gpu'" in str(error)


BAD_BODIES = {
    "dunder_import": "y = __import__('os')",
    "dunder_class": "y = x.__class__",
    "open": "y = open('/etc/passwd')",
    "getattr": "y = getattr(tl, 'load')",
    "format": "y = '{0.__class__}'.format(x)",
    # f-strings, comprehensions and := are Triton's too (over-rejection probe 20): what they
    # hold is checked as any expression is.
    "fstring_dunder": "y = f'{x.__class__}'",
    "fstring_spec_open": "y = f'{x:{open}}'",
    "lambda": "y = lambda: 0",
    "listcomp_import": "y = [__import__('os') for i in range(3)]",
    "listcomp_torch": "y = [torch.relu(x) for i in range(3)]",
    "setcomp": "y = {i for i in range(3)}",
    "genexp": "y = sum(i for i in range(3))",
    "handle": "y = x.handle.data",
    "torch": "y = torch.softmax(x, 0)",
    "numpy": "y = np.exp(x)",
    "import": "import os",
    "global": "global BLOCK",
    "walrus_dunder": "y = (z := x.__class__)",
    # A comprehension's variable is its own: named like a module, it hid that module from
    # the checker, which took `triton.testing.subprocess` for a local's attributes and let
    # a kernel start a shell (red-team round 28).
    "listcomp_hides_module": "y = [0 for triton in range(1)]\ny = triton.testing.subprocess",
    "listcomp_hides_tl": "y = [tl for tl in (x,)]",
    "listcomp_hides_builtin": "y = [range for range in (x,)]",
    # The interpreter's rewrite calls these by name: a local of that name took their place.
    "interpreter_comparison_local": "_InterpreterComparison = x",
    "interpreter_semantic_walrus": "y = (interpreter_semantic := x)",
    "dict": "y = {}",
    "starred": "y = tl.maximum(*x)",
    "try": "try:\n    pass\nexcept Exception:\n    pass",
    "with": "with x:\n    pass",
    "raise": "raise ValueError('x')",
    "delete": "del x",
    "class": "class C:\n    pass",
    "nested_def": "def g():\n    pass",
    "attribute_store": "x.dtype = 1",
    "item_store": "x[0] = 1",
    "module_as_value": "m = tl.core",
    # A name missing from a language module is tolerated only as a Triton function's name,
    # as the chain's last link: the interpreter copies its own globals into the modules
    # whose functions it rewrites, and this chain reached Python's builtins (exec).
    "missing_attribute": "y = tl.no_such_function(x)",
    "missing_then_chained": "y = tl.standard.dataclasses.re.enum.bltns.exec",
    "missing_interpreter_global": "y = tl.standard.partial(x)",
    "module_escape": "y = tl.core.inspect",
    "triton_runtime": "y = triton.runtime",
    "triton_compile": "y = triton.compile",
    "extra_pkgutil": "y = tl.extra.pkgutil",
    "ir_module": "y = tl.core.ir.builder",
    "typing_module": "y = tl.core.typing.cast",
    "runtime_function": "y = tl.standard.jit",
    "kernel_attribute": "y = k.fn",
    "builtin_attribute": "y = print.x",
    "jit_internals": "y = tl.sum.rewriter",
    "kernel_launch": "k[(1,)](x)",
    # A jit function given as a constexpr (``x`` here) reaches the executor's own build of
    # it: its parameter list is not the kernel's to rewrite (red-team round 26c).
    "jit_argument_names": "y = x.arg_names",
    "jit_argument_constexprs": "y = x.constexprs",
    "double_star": "y = tl.load(**x)",
    "dunder_name": "y = __builtins__",
}


BAD_HEADER = "import torch\nimport numpy as np\nimport triton\nimport triton.language as tl\nBLOCK = 4\n\n"


@pytest.mark.parametrize("body", BAD_BODIES.values(), ids=BAD_BODIES.keys())
def test_malicious_bodies_are_refused_with_their_line(body):
    source = BAD_HEADER + "@triton.jit\ndef k(x):\n    y = x\n" + textwrap.indent(body, "    ") + "\n    return y\n"
    error = refused(source)
    assert error.line == 10, str(error)
    assert str(error).startswith("line 10: ")


@pytest.mark.parametrize("signature", [
    "@triton.jit(do_not_specialize=make())\ndef k(x):",
    "@triton.jit(repr=str)\ndef k(x):",
    "@triton.jit('positional')\ndef k(x):",
    "@triton.autotune(configs=[], key=[])\n@staticmethod\n@triton.jit\ndef k(x):",  # staticmethod: outermost only
    "@triton.autotune(configs=[], key=[])\n@functools.cache\n@triton.jit\ndef k(x):",  # between Triton's
    "@triton.jit\n@triton.autotune(configs=[], key=[])\ndef k(x):",
    "@triton.jit\ndef k(x, n=len('a')):",
    "@triton.jit\ndef k(x, n=UNBOUND):",  # a module constant (BLOCK) is allowed; an unknown name is not
    "@triton.jit\ndef k(x, n: make() = 1):",
    "@triton.jit\ndef k(*x):",
    "@triton.jit\ndef k(**x):",
    "@triton.jit\ndef __builtins__(x):",
    "@triton.jit\nasync def k(x):",
])
def test_signatures_and_decorators_are_checked(signature):
    refused("import functools\nimport triton\nimport triton.language as tl\nBLOCK = 1\n" + signature + "\n    return x\n")


def test_the_candidates_own_decorators_outside_tritons_are_dropped():
    """Written against the version before, which refused any decorator but
    ``@staticmethod``, autotune and heuristics: FlagGems writes ``@libentry()`` (a launcher
    cache of its own) above ``@triton.autotune`` and ``@triton.jit`` on nearly every kernel,
    and such a candidate was a ``compile_error``. The candidate's decorators run in its own
    process only; the trusted build drops them as it drops autotune's."""
    for outer in ("@libentry()", "@functools.cache", "@staticmethod(1)", "@registry.register('add')\n@libentry()"):
        kernels = extract_kernels(textwrap.dedent(f"""
            import functools
            import triton
            import triton.language as tl
            from mylib import libentry, registry

            {outer.replace(chr(10), chr(10) + "            ")}
            @triton.autotune(configs=[triton.Config({{"BLOCK": 4}})], key=["n"])
            @triton.jit
            def k(x_ptr, n, BLOCK: tl.constexpr):
                pass
        """), "candidate.py")
        assert set(kernels) == {"k"}, outer


def test_a_version_switch_binds_the_first_branch_that_imports():
    """Written against the version before, which read both branches of a module-level
    ``if`` and kept the last binding: Liger-Kernel's ``if triton >= 3: from
    triton.language.extra.libdevice import rsqrt`` ``else: from triton.language.math import
    rsqrt`` gave the trusted kernel the else branch's function (not callable under the
    interpreter: a ``runtime_error``), and unsloth's ``triton_tanh = libdevice.tanh`` in
    such a switch was "not available in a kernel". A name the branches alone bind takes the
    first branch's value that is one; a missing attribute of an allowed module is refused
    only where a traced path reaches it."""
    source = textwrap.dedent("""
        import operator
        import triton
        import triton.language as tl
        from mylib import compare_version

        if compare_version("triton", operator.ge, "3.0.0"):
            try:
                from triton.language import sigmoid as root
            except ModuleNotFoundError:
                from triton.language.standard import sigmoid as root
            activation = tl.sigmoid
            SCALE = 2.0
        else:
            from triton.language.math import rsqrt as root
            activation = tl.math.no_such_function
            SCALE = 3.0

        @triton.jit
        def never_called(x):
            return tl.math.tanh(x)  # not in triton.language.math of every version

        @triton.jit
        def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr, MODE: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=1.0)
            if MODE == 1:
                x = never_called(x)
            tl.store(out_ptr + offs, activation(root(x)) * SCALE, mask=offs < n)
    """)
    kernels = extract_kernels(source, "candidate.py")
    x = torch.rand(10) + 0.5
    out = torch.empty_like(x)
    kernels["k"][(1,)](x, out, 10, BLOCK=16, MODE=0)
    torch.testing.assert_close(out, torch.sigmoid(torch.sigmoid(x)) * 2.0)


def test_a_module_bound_by_assignment_is_a_kernels_as_an_import_would_be():
    """Written against over-rejection probe 16's version, where only import statements
    bound modules: ``libdevice = tl.extra.libdevice`` at the top level, in a ``try`` whose
    handler picks another module, or in a version switch by ``hasattr``, was "not
    available in a kernel", though Triton compiles it (Inductor's helpers pick their
    ``libdevice`` so). A try's handler binds only where its body fails here."""
    source = textwrap.dedent("""
        import triton
        import triton.language as tl
        import triton.language.extra.libdevice  # makes tl.extra.libdevice an attribute

        plain = tl.extra.libdevice
        try:
            tried = tl.extra.no_such_module
        except AttributeError:
            tried = tl.math
        if hasattr(tl.extra, "libdevice"):
            switched = tl.extra.libdevice
        else:
            switched = tl.math
        try:
            kept = tl.math
        except AttributeError:
            kept = tl.extra.no_such_module

        @triton.jit
        def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=1.0)
            y = plain.erf(x) + tried.exp2(x) + switched.tanh(x) + kept.rsqrt(x)
            tl.store(out_ptr + offs, y, mask=offs < n)
    """)
    from kz_backend_triton import interpreted_libdevice

    interpreted_libdevice.install()  # libdevice's math under the interpreter, as the executor has it
    kernels = extract_kernels(source, "candidate.py")
    x = torch.rand(10) + 0.5
    out = torch.empty_like(x)
    kernels["k"][(1,)](x, out, 10, BLOCK=16)
    torch.testing.assert_close(out, torch.erf(x) + torch.exp2(x) + torch.tanh(x) + torch.rsqrt(x))
    assert "not available" in str(refused("""
        import triton
        import triton.language as tl

        plain = tl.extra.libdevice
        plain = tl.math

        @triton.jit
        def k(x):
            return plain.erf(x)
    """))


def test_nested_duplicate_and_syntax_errors_are_refused():
    assert "inside a function" in str(refused("""
        import triton

        def outer():
            @triton.jit
            def k(x):
                return x
            return k
    """))
    error = refused("""
        import triton

        @triton.jit
        def k(x):
            return x

        class Again:
            @triton.jit
            def k(x):
                return x
    """)
    assert error.line == 10 and "first at line 5" in str(error)
    error = refused("import triton\n\ndef broken(:\n    pass\n")
    assert error.line == 3 and "syntax error" in str(error)
    assert "syntax error" in str(refused("x = 1\0"))


def test_text_smuggled_in_a_string_is_refused():
    # The interpreter re-reads a kernel from its last line that starts with "def ".
    refused('''
        import triton

        @triton.jit
        def k(x):
            s = """
        def k(x):
            return ().__class__
        #"""
            return x
    ''')


def test_a_plain_python_helper_is_not_available():
    error = refused("""
        import triton

        def helper(x):
            return x

        @triton.jit
        def k(x):
            return helper(x)
    """)
    assert error.line == 9 and "'helper'" in str(error)


def test_namespace_is_restricted_before_and_after_a_launch():
    kernels = extract(COPY_KERNEL)
    namespace = kernels["copy_kernel"].fn.__globals__
    allowed = {"__builtins__", "__name__", "triton", "tl", "copy_kernel", "interpreter_semantic", "_InterpreterComparison"}
    assert set(namespace) <= allowed
    x = torch.arange(10, dtype=torch.float32)
    torch.testing.assert_close(launch_unary(kernels["copy_kernel"], x), x)
    assert {"np", "inspect", "math", "os"}.isdisjoint(namespace)


# Without the interpreter (TRITON_INTERPRET=0, in a fresh process: triton.language's own kernels
# are built at import time): Triton's code generator resolves globals through the restricted
# namespace. "compile" needs no GPU (Triton's wheel brings ptxas); "run" launches on CUDA and
# compares with the candidate's own module.
GPU_FEATURES = """
import math
import triton
import triton.language as tl
from triton.language.extra import libdevice
from torch._inductor.runtime import triton_helpers

CE = tl.constexpr(2)
DTYPE = tl.float32

@triton.jit
def helper(x, factor):
    return x * factor

@triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["n"])
@triton.jit(do_not_specialize=["n"])
def features(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(DTYPE)
    tl.store(out_ptr + offs, helper(libdevice.tanh(triton_helpers.maximum(x, x)), CE) + math.pi, mask=offs < n)
"""

GPU_SCRIPT = r"""
import glob, importlib.util, json, math, os, sys
import torch, triton
from kz_backend_triton.trusted import extract_kernels

mode, repo, features = sys.argv[1:4]
CONSTEXPRS = {"BLOCK_SIZE": 1024, "BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "BLOCK": 64}

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

paths = sorted(glob.glob(os.path.join(repo, "examples", "candidates", "triton", "*.py"))) + [features]
for path in paths:
    kernels = extract_kernels(open(path).read(), path)
    for name, kernel in kernels.items():
        assert type(kernel).__name__ == "JITFunction" and kernel.src.startswith(f"def {name}(")
        assert "torch" not in kernel.__globals__ and "nn" not in kernel.__globals__
    if mode == "compile":
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        for name, kernel in kernels.items():
            if name == "helper":
                continue
            signature, constexprs = {}, {}
            for i, param in enumerate(kernel.arg_names):
                if param in CONSTEXPRS:
                    signature[param], constexprs[(i,)] = "constexpr", CONSTEXPRS[param]
                else:
                    signature[param] = "*fp32" if param.endswith("_ptr") else "fp32" if param == "scale" else "i32"
            compiled = triton.compile(ASTSource(kernel, signature, constexprs), target=GPUTarget("cuda", 90, 32))
            print(json.dumps({"kernel": name, "ok": len(compiled.asm["cubin"]) > 0}))
    elif path == features:
        x = torch.randn(1000, device="cuda")
        out = torch.empty_like(x)
        kernels["features"][(triton.cdiv(1000, 64),)](x, out, 1000, BLOCK=64)
        ok = torch.allclose(out, 2 * torch.tanh(x) + math.pi, atol=1e-5, rtol=1e-5)
        print(json.dumps({"kernel": "features", "ok": ok}))
    else:
        stem = os.path.basename(path)[:-3]
        module = load(path, "candidate_" + stem)
        problem = load(os.path.join(repo, "examples", "problems", stem + ".py"), "problem_" + stem)
        torch.manual_seed(0)
        model = module.ModelNew(*problem.get_init_inputs()).cuda()
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
        with torch.no_grad():
            expected = model(*inputs)
            for name, kernel in kernels.items():
                setattr(module, name, kernel)
            got = model(*inputs)
        print(json.dumps({"kernel": stem, "ok": bool(torch.equal(got, expected))}))
"""


def script_without_interpreter(script: str, *args: str, **env: str) -> str:
    """``script``'s output, run by a fresh Python with Triton compiling (no interpreter)."""
    env = {**os.environ, "TRITON_INTERPRET": "0", **env,
           "PYTHONPATH": os.pathsep.join([str(REPO / "plugins" / "backend_triton"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def run_without_interpreter(mode: str, tmp_path: Path) -> dict[str, bool]:
    features = tmp_path / "features.py"
    features.write_text(GPU_FEATURES)
    stdout = script_without_interpreter(GPU_SCRIPT, mode, str(REPO), str(features), TRITON_CACHE_DIR=str(tmp_path / "cache"), TRITON_DEFAULT_FP_FUSION="1")
    results = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return {r["kernel"]: r["ok"] for r in results}


def test_kernels_compile_for_a_gpu_without_the_interpreter(tmp_path):
    import triton.backends

    if "nvidia" not in getattr(triton.backends, "backends", {}):
        pytest.skip("Triton's NVIDIA backend is not installed")
    results = run_without_interpreter("compile", tmp_path)
    assert results == dict.fromkeys([k for p in EXAMPLES for k in extract(p.read_text())] + ["features"], True)


@pytest.mark.gpu
def test_kernels_run_on_a_gpu_as_in_the_candidates_module(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")
    results = run_without_interpreter("run", tmp_path)
    assert results == dict.fromkeys([p.stem for p in EXAMPLES] + ["features"], True)


DECORATED = """
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})],
    key=["n"],
)
@triton.jit
def tuned(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit(do_not_specialize=["n"])
def unspecialized(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class Holder:
    @staticmethod
    @triton.jit
    def inside(x_ptr, n):
        pass
"""

CACHE_KEYS = r"""
import importlib.util, json, sys
from pathlib import Path
from kz_backend_triton.trusted import extract_kernels

def jit_function(value):
    while not hasattr(value, "cache_key") and hasattr(value, "fn"):
        value = value.fn  # an autotuner's or heuristics' kernel
    return value

for index, path in enumerate(sys.argv[1:]):
    spec = importlib.util.spec_from_file_location(f"kz_keys_{index}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    for name, kernel in extract_kernels(Path(path).read_text(), path).items():
        owner, _, attribute = name.rpartition(".")
        own = getattr(getattr(module, owner) if owner else module, attribute, None)
        if own is None:
            continue  # a kernel kept in a class, also found by its own name
        print(json.dumps({"kernel": f"{Path(path).stem}:{name}", "same": jit_function(own).cache_key == kernel.cache_key}))
"""


def test_an_extracted_kernel_has_the_cache_key_of_the_candidate_s_own(tmp_path):
    """Triton keys a compiled kernel by its text, what it names and the line it starts at
    (``JITFunction.cache_key``). A candidate worker reads the kernels executors compiled
    (``kz_backend_triton/cache.py``), so that its first call loads a kernel of the same
    source instead of compiling it, with the GPU held shared. Built without its decorators,
    an extracted kernel started at its ``def`` line, not at its first decorator's as the
    candidate's own does: every key differed and no candidate ever loaded one (0.87 s a level
    1 candidate's first call on an H100, fifty-fourth session)."""
    decorated = tmp_path / "decorated.py"
    decorated.write_text(DECORATED)
    stdout = script_without_interpreter(CACHE_KEYS, *map(str, EXAMPLES), str(decorated))
    same = {r["kernel"]: r["same"] for r in map(json.loads, (line for line in stdout.splitlines() if line.startswith("{")))}
    assert {"decorated:tuned", "decorated:unspecialized", "decorated:Holder.inside"} <= set(same)
    assert len(same) > 3 and all(same.values()), same


CACHE_HIT = r"""
import importlib.util, os, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from kz_backend_triton.trusted import extract_kernels

path = sys.argv[1]
spec = importlib.util.spec_from_file_location("kz_hit", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
signature = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
for kernel in (extract_kernels(open(path).read(), path)["unspecialized"], module.unspecialized):
    triton.compile(ASTSource(kernel, signature, {(3,): 64}), target=GPUTarget("cuda", 90, 32))
    print(len(os.listdir(os.environ["TRITON_CACHE_DIR"])))
"""


def test_a_kernel_an_executor_compiled_is_a_cache_hit_for_the_candidate_s_own(tmp_path):
    """The same, through Triton's compiler for an H100/H200 target (no GPU needed): the
    extracted kernel compiled first (as an executor does), the candidate's own kernel of the
    same source finds it in the cache and adds nothing (before: a second entry, compiled)."""
    import triton.backends

    if "nvidia" not in getattr(triton.backends, "backends", {}):
        pytest.skip("Triton's NVIDIA backend is not installed")
    decorated = tmp_path / "decorated.py"
    decorated.write_text(DECORATED)
    stdout = script_without_interpreter(CACHE_HIT, str(decorated), TRITON_CACHE_DIR=str(tmp_path / "cache"))
    assert stdout.split() == ["1", "1"], stdout


def test_a_def_line_in_a_kernel_s_decorators_is_refused():
    """Triton reads a kernel's text from its first decorator's line on (and then from the
    first line starting with ``def``): a ``def`` line in a decorator's string would make
    it read other text than the checked tree."""
    source = (
        "import triton\n"
        "import triton.language as tl\n"
        "\n"
        '@triton.jit(do_not_specialize=["""\n'
        "def copy_kernel(x_ptr, out_ptr, n):\n"
        "    pass\n"
        '"""])\n'
        "def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
        "    pass\n"
    )
    with pytest.raises(KernelExtractionError) as info:
        extract_kernels(source, f"<kz-test-source-{next(SOURCE_NAMES)}>")
    assert "no other line of it or of its decorators" in str(info.value)


def test_a_launch_gives_tensors_to_plain_parameters_only():
    """Written against the version before, where the executor launched a kernel with
    whatever the plan held: a dict of the input and output tensors given to a
    ``tl.constexpr`` parameter (or a list given to a plain one) reached the kernel's body
    as the objects themselves under the interpreter, and the body ran torch on them
    (``tests/cheats/triton/constexpr_tensor_torch_in_kernel.py``, judged correct). Tensors
    may go to plain parameters, alone or in tuples; constexprs and launch options hold none."""
    from kz_backend_triton.kernels import KernelArgumentError, check_arguments

    source = textwrap.dedent(
        '''
        import triton
        import triton.language as tl

        @triton.autotune(configs=[triton.Config({"BLOCK": 16})], key=["n"])
        @triton.jit
        def tuned(x_ptr, pair, n, T: tl.constexpr, BLOCK: tl.constexpr):
            pass
        '''
    )
    kernel = extract_kernels(source, "candidate.py")["tuned"]
    x = torch.zeros(4)
    check_arguments("tuned", kernel, [x, (x, x), 4, "relu"], {"num_warps": 4})
    check_arguments("tuned", kernel, [x], {"pair": (x,), "n": 4, "T": tl.float32})
    refused = [
        ([x, (x, x), 4, {"x": x}], {}),  # a dict of tensors in a constexpr
        ([x, (x, x), 4, x], {}),  # a tensor as a constexpr
        ([x, [x, x], 4, 1], {}),  # a list in a plain parameter
        ([x, (x, {"y": x}), 4, 1], {}),  # a dict inside a tuple
        ([x, (x, x), 4], {"T": 1, "num_warps": x}),  # a tensor as a launch option
        ([x, (x, x), 4, 1, 16, x], {}),  # beyond the signature
    ]
    for args, options in refused:
        with pytest.raises(KernelArgumentError):
            check_arguments("tuned", kernel, args, options)


def test_what_triton_builds_tells_a_reinterpreting_kernel_whatever_its_spelling():
    """Written against round twelve's source rule, which round thirteen passed three ways
    (cheats kernel_helper_constexpr_pointer_cast, kernel_pointer_address_arithmetic,
    kernel_block_element_pointer_cast): a pointer cast in a jit helper given a pointer's
    dtype, a pointer moved onto another by integer address arithmetic, a cast to a
    pointer block's element type. What the interpreter's builder is asked for at a launch
    (on a GPU, the compiled kernel's IR) says so, whatever the source looks like."""
    from kz_backend_triton.kernels import TritonKernels

    source = textwrap.dedent(
        """
        import triton
        import triton.language as tl


        @triton.jit
        def _retype(p, dt: tl.constexpr):
            return p.to(dt)


        @triton.jit
        def helper_cast(x_ptr, o_ptr):
            src = _retype(x_ptr, o_ptr.dtype)
            tl.store(o_ptr + tl.arange(0, 4), tl.load(src + tl.arange(0, 4)))


        @triton.jit
        def address_arithmetic(x_ptr, o_ptr):
            src = o_ptr + (x_ptr.to(tl.int64) - o_ptr.to(tl.int64))
            tl.store(o_ptr + tl.arange(0, 4), tl.load(src + tl.arange(0, 4)))


        @triton.jit
        def element_type(x_ptr, o_ptr):
            src = x_ptr.to((o_ptr + tl.arange(0, 2)).type.element_ty)
            tl.store(o_ptr + tl.arange(0, 4), tl.load(src + tl.arange(0, 4)))


        @triton.jit
        def plain(x_ptr, o_ptr):
            tl.store(o_ptr + tl.arange(0, 4), tl.maximum(tl.load(x_ptr + tl.arange(0, 4)), 0.0).to(tl.int8))
        """
    )
    kernels = TritonKernels(extract_kernels(source, "<reinterpreting>"), source="")
    assert not kernels.reinterprets_bits  # the source rule alone is not asked here
    x, out = torch.randn(4), torch.zeros(4, dtype=torch.int8)
    for name in ("helper_cast", "address_arithmetic", "element_type", "plain"):
        step = {"kernel": {"name": name}, "grid": [1]}
        kernels.launch(step, [x, out], {})
        assert kernels.reinterprets(step) is (name != "plain"), name


def test_where_an_interpreted_kernels_loads_and_stores_reach_is_checked():
    """Written against round thirteen's version, which a kernel passed with no cast at all
    (cheat r14_scan_retyped_pointer_sign_extension): from a float32 pointer it scanned to
    an int8 buffer it was given and stored floats there, for torch's sign extension to
    test their top bytes. Under the interpreter a load or store into a given storage as
    another element type, or a load outside every given storage, reads bytes as another
    dtype; a store outside them is refused. Masked-off lanes reach nothing."""
    from kz_backend_triton.kernels import KernelOutOfBounds, TritonKernels

    source = textwrap.dedent(
        """
        import triton
        import triton.language as tl


        @triton.jit
        def onto_another(x_ptr, o_ptr, probe_ptr, delta):
            tl.store(probe_ptr + delta + tl.arange(0, 4), tl.load(x_ptr + tl.arange(0, 4)))


        @triton.jit
        def read_outside(x_ptr, o_ptr, probe_ptr, delta):
            tl.store(probe_ptr + tl.arange(0, 4), tl.load(x_ptr + delta + tl.arange(0, 4)))


        @triton.jit
        def write_outside(x_ptr, o_ptr, probe_ptr, delta):
            tl.store(x_ptr + delta + tl.arange(0, 4), tl.load(probe_ptr + tl.arange(0, 4)))


        @triton.jit
        def masked_tail(x_ptr, o_ptr, probe_ptr, delta):
            offsets = tl.arange(0, 8)
            tl.store(probe_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < 4, other=0.0), mask=offsets < 4)
        """
    )
    kernels = TritonKernels(extract_kernels(source, "<addresses>"), source="")
    x, out, probe, spare = torch.randn(4), torch.zeros(64, dtype=torch.int8), torch.zeros(4), torch.zeros(16)
    # Allocations are 64-byte aligned: whole float32 steps from one to another.
    onto, outside = (out.data_ptr() - probe.data_ptr()) // 4, (spare.data_ptr() - x.data_ptr()) // 4
    for name, where, expected in (("masked_tail", 0, False), ("onto_another", onto, True), ("read_outside", outside, True)):
        step = {"kernel": {"name": name}, "grid": [1]}
        kernels.launch(step, [x, out, probe, where], {})
        assert kernels.reinterprets(step) is expected, name
    with pytest.raises(KernelOutOfBounds):
        kernels.launch({"kernel": {"name": "write_outside"}, "grid": [1]}, [x, out, probe, outside], {})
    assert torch.equal(spare, torch.zeros(16))


TABLES = textwrap.dedent(
        """
        import triton
        import triton.language as tl


        @triton.jit
        def through_table(table_ptr, x_ptr, n, delta, AS: tl.constexpr):
            # Triton tutorial 8's way: a pointer loaded from a table of addresses, cast
            dst = tl.load(table_ptr).to(tl.pointer_type(AS))
            offsets = tl.arange(0, 16)
            mask = offsets < n
            tl.store(dst + delta + offsets, tl.load(x_ptr + offsets, mask=mask).to(AS) * 2, mask=mask)
        """
)


def test_an_interpreted_kernel_reaches_the_memory_its_address_table_names_and_nothing_more():
    """Written against the version before, which replayed a table with the recording's
    addresses and refused the store (``kernel_out_of_bounds``). A pointer loaded from an
    address table reaches the tensor the table names as a tensor argument would: in its
    storage, with its element type; past it, or through a number that names no tensor of
    the call, a store is refused."""
    from kz_core.evaluate.plans import Replay
    from kz_core.evaluate.recording import Recorder, record_kernel
    from kz_backend_triton.kernels import KernelOutOfBounds, TritonKernels

    kernels = TritonKernels(extract_kernels(TABLES, "<tables>"), source="")
    outside = torch.zeros(64)

    def replayed(delta, named=True):
        def forward(x):
            out = torch.zeros(16)
            table = torch.tensor([out.data_ptr() if named else outside.data_ptr()])
            with record_kernel("triton", {"name": "through_table"}, (1,), [table, x, x.numel(), delta], {"AS": tl.float32}):
                out.copy_(x * 2)
            return out

        x = torch.randn(16)
        recorder = Recorder([x], 1 << 20)
        plan = recorder.plan(recorder.call(forward, [x]))
        assert [s["kind"] for s in plan["steps"]].count("addresses") == (1 if named else 0)
        fresh, provenance = torch.randn(16), {}
        result = Replay(plan, recorder.constants, kernels.launch, "cpu")(fresh, provenance=provenance)
        return fresh, result, provenance

    fresh, result, provenance = replayed(0)
    torch.testing.assert_close(result, fresh * 2)
    assert provenance["kernel_derived"] == [True]  # written through the table only
    with pytest.raises(KernelOutOfBounds):
        replayed(16)  # one float past the table's tensor
    with pytest.raises(KernelOutOfBounds):
        replayed(0, named=False)  # an address of no tensor of the call: a number
    assert torch.equal(outside, torch.zeros(64))


#: Triton's own lowering (sort, flip, a float atomic_max, a bool load) and a kernel's own bitcast.
LOWERING = textwrap.dedent(
        """
        import triton
        import triton.language as tl


        @triton.jit
        def sorts(x_ptr, o_ptr, m_ptr):
            c = tl.arange(0, 4)
            tl.store(o_ptr + c, tl.sort(tl.load(x_ptr + c)))


        @triton.jit
        def flips(x_ptr, o_ptr, m_ptr):
            c = tl.arange(0, 4)
            tl.store(o_ptr + c, tl.flip(tl.load(x_ptr + c), 0))


        @triton.jit
        def atomic_maximum(x_ptr, o_ptr, m_ptr):
            c = tl.arange(0, 4)
            tl.atomic_max(o_ptr, tl.max(tl.load(x_ptr + c), axis=0))


        @triton.jit
        def bool_mask(x_ptr, o_ptr, m_ptr):
            c = tl.arange(0, 4)
            tl.store(o_ptr + c, tl.where(tl.load(m_ptr + c), tl.load(x_ptr + c), 0.0))


        @triton.jit
        def own_cast(x_ptr, o_ptr, m_ptr):
            c = tl.arange(0, 4)
            tl.store(o_ptr + c, tl.load(x_ptr + c).to(tl.int32, bitcast=True).to(tl.float32))
        """
)


def test_triton_lowering_its_own_operations_is_not_the_kernel_reading_bytes_as_another_dtype():
    """Written against round fifteen's version (over-rejection probe 9): ``tl.sort`` and
    ``tl.flip`` (which compare floats as integers in ``triton/language/standard.py``), a
    float ``tl.atomic_max`` (lowered onto an integer pointer) and a load of a bool tensor
    (its pointer read as int8) made the builder bitcast, so the kernel counted as reading
    bytes as another dtype, and an honest float32 result rounded to float16 by torch was
    torch computing. Under the interpreter only the kernel's own casts count; in a
    compiled kernel's IR, ops whose locations lie in Triton's library or that match its
    lowering are left out."""
    from kz_backend_triton.kernels import TritonKernels, ir_reinterprets

    kernels = TritonKernels(extract_kernels(LOWERING, "<lowering>"), source="")
    x, out, mask = torch.randn(4), torch.zeros(4), torch.tensor([True, False, True, True])
    for name in ("sorts", "flips", "atomic_maximum", "bool_mask", "own_cast"):
        step = {"kernel": {"name": name}, "grid": [1]}
        kernels.launch(step, [x, out, mask], {})
        assert kernels.reinterprets(step) is (name == "own_cast"), name

    # Compiled IR (as Triton 3.9 prints it for sm_90), trimmed to what decides.
    library = '#loc9 = loc("/site-packages/triton/language/standard.py":557:20)\n#loc2 = loc("k.py":3:1)\n#loc24 = loc(callsite(#loc9 at #loc2))\n'
    flip = "%y = tt.bitcast %4 : tensor<64xf32> -> tensor<64xi32> loc(#loc24)\n" + library
    boolean = "%4 = tt.bitcast %3 : tensor<64x!tt.ptr<i1>> -> tensor<64x!tt.ptr<i8>> loc(#loc2)\n" + library
    atomic = (
        "%4 = tt.bitcast %3 : f32 -> i32 loc(#loc2)\n%5 = tt.bitcast %o_ptr : !tt.ptr<f32> -> !tt.ptr<i32> loc(#loc2)\n"
        "%6 = arith.shrui %4, %c31_i32 : i32 loc(#loc2)\n%7 = arith.cmpi ne, %6, %c0_i32 : i32 loc(#loc2)\n"
        "%9 = tt.atomic_rmw max, acq_rel, gpu, %5, %4, %7 : (!tt.ptr<i32>, i32, i1) -> i32 loc(#loc2)\n" + library
    )
    own = "%5 = tt.bitcast %4 : tensor<64xf32> -> tensor<64xi32> loc(#loc2)\n%6 = arith.sitofp %5 : tensor<64xi32> to tensor<64xf32> loc(#loc2)\n" + library
    stored = atomic.replace("%7 = arith.cmpi", "tt.store %o_ptr, %4 : !tt.ptr<i32> loc(#loc2)\n%7 = arith.cmpi")
    assert not ir_reinterprets(flip) and not ir_reinterprets(boolean) and not ir_reinterprets(atomic)
    assert ir_reinterprets(own) and ir_reinterprets(stored)
    assert ir_reinterprets("%y = tt.bitcast %4 : tensor<64xf32> -> tensor<64xi32>\n")  # no locations: counted


LOWERING_SCRIPT = r"""
import json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from kz_backend_triton.kernels import ir_reinterprets
from kz_backend_triton.trusted import extract_kernels

kernels = extract_kernels(sys.stdin.read(), "<lowering>")
for name, kernel in kernels.items():
    compiled = triton.compile(ASTSource(kernel, {"x_ptr": "*fp32", "o_ptr": "*fp32", "m_ptr": "*i1"}, {}), target=GPUTarget("cuda", 90, 32))
    ir = compiled.asm["ttir"]
    print(json.dumps({"kernel": name, "reinterprets": ir_reinterprets(ir), "located": "#loc" in ir}))
"""


def test_triton_lowering_its_own_operations_is_told_apart_in_a_compiled_kernels_ir(tmp_path):
    """The same five kernels compiled for an H100/H200 target (no GPU needed; a fresh
    process without the interpreter): the IR the installed Triton prints holds the
    locations that tell its library's bitcasts from the kernel's own, and only
    ``own_cast`` counts as reading bytes as another dtype. (Triton 3.6, the GPU image's,
    and 3.9 print them alike.)"""
    import triton.backends

    if "nvidia" not in getattr(triton.backends, "backends", {}):
        pytest.skip("Triton's NVIDIA backend is not installed")
    env = {**os.environ, "TRITON_INTERPRET": "0", "TRITON_CACHE_DIR": str(tmp_path / "cache"), "TRITON_DEFAULT_FP_FUSION": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO / "plugins" / "backend_triton"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", LOWERING_SCRIPT], input=LOWERING, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    results = {r["kernel"]: r for r in map(json.loads, (line for line in done.stdout.splitlines() if line.startswith("{")))}
    assert set(results) == {"sorts", "flips", "atomic_maximum", "bool_mask", "own_cast"}
    for name, result in results.items():
        assert result["located"], name
        assert result["reinterprets"] is (name == "own_cast"), name


def test_kernels_that_read_bytes_as_another_dtype_are_told_apart():
    """A bitcast, a pointer cast or inline PTX lets a kernel view bytes as another dtype
    (the replay then treats what it is given as viewed so); plain kernels do not."""
    from kz_backend_triton.kernels import TritonKernels

    def source(body: str, head: str = "") -> str:
        lines = "\n".join(f"    {line}" for line in body.splitlines())
        return f"import torch\nimport triton\nimport triton.language as tl\n{head}\n\n@triton.jit\ndef k(x_ptr, o_ptr, n):\n{lines}\n"

    def reinterprets(body: str, head: str = "") -> bool:
        return TritonKernels({}, source=source(body, head)).reinterprets_bits

    assert reinterprets("y = tl.load(x_ptr).to(tl.int32, bitcast=True)")
    assert reinterprets("p = x_ptr.to(tl.pointer_type(tl.int8))")
    assert not reinterprets("tl.store(o_ptr, tl.maximum(tl.load(x_ptr), 0.0))")
    # Written against the version before, which looked for three names only: a bitcast
    # passed by position, a pointer type by its alias, libdevice's reinterpreting casts.
    for body in (
        "y = tl.load(x_ptr).to(tl.int32, None, True)", "y = tl.cast(tl.load(x_ptr), tl.int32, None, True)",
        "y = tl.load(x_ptr).to(*HOW)", "p = x_ptr.to(tl.pi32_t)", "y = libdevice.float_as_int(tl.load(x_ptr))",
    ):
        assert reinterprets(body), body
    # Written against round twelve's version, which passed a cast to another pointer's
    # type (cheat kernel_pointer_dtype_sign_extension) and an import's alias.
    assert reinterprets("p = x_ptr.to(o_ptr.dtype)")
    assert reinterprets("p = tl.cast(x_ptr, o_ptr.dtype)")
    assert reinterprets("p = x_ptr.to(P)", head="from triton.language import pi32_t as P")
    # Casts to a dtype written out, the wrapper's torch code and comments do not count.
    assert not reinterprets(
        "y = tl.load(x_ptr).to(tl.float16)\nz = tl.cast(y, tl.float32)\ntl.store(o_ptr, z.to(o_ptr.dtype.element_ty))",
        head="# a bitcast would be wrong here\ndef wrapper(x):\n    return x.view(torch.int32).to(x.dtype, copy=True)",
    )


def test_triton_jit_called_as_a_function_makes_a_kernel():
    """Written against the version before, which found kernels by their decorator only:
    ``gelu_kernel = triton.jit(_gelu_body)`` (and with options, or inside autotune) was no
    kernel at all, so the candidate was ``no_triton_kernel``, or, beside a decorated one,
    ``kernel_not_in_source`` when its launch named ``_gelu_body``."""
    kernels = extract("""
        import triton
        import triton.language as tl
        from triton import jit

        def _negate_body(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, -tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        def _double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, twice(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)

        def _twice(x):
            return x * 2.0

        negate_kernel = triton.jit(_negate_body)
        launch = negate_kernel
        twice = jit(_twice)
        double_kernel = triton.autotune(configs=[triton.Config({"BLOCK": 16})], key=["n"])(
            triton.jit(do_not_specialize=["n"])(_double))
    """)
    # the recording names a kernel by its function's name (``JITFunction.fn.__name__``)
    assert set(kernels) == {"_negate_body", "_double", "_twice"}
    assert kernels["_double"].kwargs["do_not_specialize"] == ["n"]
    assert kernels["_double"].fn.__globals__["twice"] is kernels["_twice"]  # reached by its assigned name
    x = torch.randn(37)
    torch.testing.assert_close(launch_unary(kernels["_negate_body"], x), -x)
    torch.testing.assert_close(launch_unary(kernels["_double"], x), x * 2.0)


@pytest.mark.parametrize("assignment", [
    "k = triton.jit(make())",  # not a function by name
    "k = triton.jit(body, repr=str)",  # options are literal, from the allow-list
    "k = triton.jit(undefined_body)",  # no def of it
    "k = triton.jit(decorated)",  # already a kernel
    "k = triton.jit(late)",  # defined after the assignment
    "k = triton.jit(body)\nk = triton.jit(other)",  # one name, two kernels
    "k = triton.jit(body)\nk2 = triton.jit(body, debug=True)",  # one kernel, two option sets
    "tl = triton.jit(body)",  # the name of an import
    "k = triton.jit(bad)",  # its body is checked as a decorated kernel's
    "k = triton.jit(method)",  # a function inside a class is not a module-level def
])
def test_triton_jit_called_as_a_function_is_checked(assignment):
    refused(f"""
import triton
import triton.language as tl

def make():
    return 1

@triton.jit
def decorated(x):
    return x

def body(x):
    return x

def other(x):
    return x

def bad(x):
    return x.__class__

class Holder:
    def method(x):
        return x

{assignment}

def late(x):
    return x
""")


def test_a_kernel_defined_in_a_function_stays_refused_with_triton_jit_called():
    error = refused("""
        import triton

        def factory():
            def body(x):
                return x
            return body

        k = triton.jit(factory())
    """)
    assert "must be given, by name" in str(error)
    assert "a nested function is not allowed" in str(refused("""
        import triton

        def factory():
            def body(x):
                return x
            return body

        k = triton.jit(factory)
    """))


def test_two_classes_may_each_keep_a_kernel_of_one_name():
    """Written against the version before, which keyed kernels by their own name: two
    ``@staticmethod`` kernels named ``kernel`` in ``MinOp`` and ``ArgminOp`` were "defined
    twice". They are keyed by qualified name, as the recording names them; the shared
    name reaches neither from another kernel, and one scope defining it twice stays refused."""
    kernels = extract("""
        import triton
        import triton.language as tl

        class Negate:
            @staticmethod
            @triton.jit
            def kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
                offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                tl.store(out_ptr + offs, -tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        class Double:
            @staticmethod
            @triton.jit
            def kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
                offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                tl.store(out_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

            class Inner:
                @triton.jit
                def kernel(x):
                    return x
    """)
    assert set(kernels) == {"Negate.kernel", "Double.kernel", "Double.Inner.kernel"}
    assert "kernel" not in kernels["Negate.kernel"].fn.__globals__
    x = torch.randn(37)
    torch.testing.assert_close(launch_unary(kernels["Negate.kernel"], x), -x)
    torch.testing.assert_close(launch_unary(kernels["Double.kernel"], x), 2.0 * x)
    assert "'kernel' is not available" in str(refused("""
        import triton

        class A:
            @triton.jit
            def kernel(x):
                return x

        class B:
            @triton.jit
            def kernel(x):
                return x

        @triton.jit
        def caller(x):
            return kernel(x)
    """))
    error = refused("""
        import triton

        class A:
            @triton.jit
            def kernel(x):
                return x

            @triton.jit
            def kernel(x):
                return x
    """)
    assert error.line == 10 and "defined twice (first at line 6)" in str(error)


def test_the_recording_names_a_class_kernel_by_its_qualified_name():
    from kz_backend_triton.launches import _kernel_name

    def kernel():
        pass

    assert _kernel_name(kernel) == "kernel"  # defined in a function: its plain name
    kernel.__qualname__ = "MinOp.kernel"  # as a class at module level makes it
    assert _kernel_name(kernel) == "MinOp.kernel"
    assert _kernel_name(launch_unary) == "launch_unary" and _kernel_name(None) is None


def test_a_module_level_if_of_literal_constants_picks_its_kernel():
    """Written against the version before, which read both branches of every module-level
    ``if``: two variants of ``mse_kernel`` under ``if USE_ATOMICS: ... else: ...`` were
    "defined twice". A test of constants that one plain statement binds before it is
    computed, and only the branch it takes is read."""
    source = """
        import triton
        import triton.language as tl

        USE_ATOMICS = {flag}
        BLOCK = 64

        if USE_ATOMICS and BLOCK >= 32:
            @triton.jit
            def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
                offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                tl.store(out_ptr + offs, -tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
        elif not USE_ATOMICS:
            @triton.jit
            def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
                offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                tl.store(out_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
    """
    x = torch.randn(37)
    torch.testing.assert_close(launch_unary(extract(source.format(flag="True"))["k"], x), -x)
    torch.testing.assert_close(launch_unary(extract(source.format(flag="False"))["k"], x), 2.0 * x)
    # a test kz cannot compute keeps the refusal: a call, a constant a branch binds (a guess),
    # a constant bound twice, one bound after the if, a function an import switch binds
    for prelude, test in [("FLAG = True", "FLAG and torch.cuda.is_available()"),
                          ("if X:\n    FLAG = True\nelse:\n    FLAG = False", "FLAG"),
                          ("FLAG = True\nFLAG = False", "FLAG"),
                          ("", "LATER"),
                          ("if X:\n    from triton.language import sigmoid as act\nelse:\n    from triton.language import exp as act",
                           "act == tl.sigmoid")]:
        error = refused(f"import torch\nimport triton\nimport triton.language as tl\n{prelude}\nif {test}:\n    @triton.jit\n    def k(x):\n        return x\n"
                        "else:\n    @triton.jit\n    def k(x):\n        return -x\nLATER = True\n")
        assert "defined twice" in str(error), (prelude, test)
    # Red-team round 16: a name a match pattern binds (cheat r16_match_capture_branch) and
    # module code that can bind names unseen (globals()) leave the test undecided too.
    for prelude in ("FLAG = True\nmatch False:\n    case FLAG:\n        pass", "FLAG = True\nglobals()['FLAG'] = False"):
        error = refused(f"import triton\nimport triton.language as tl\n{prelude}\nif FLAG:\n    @triton.jit\n    def k(x):\n        return x\n"
                        "else:\n    @triton.jit\n    def k(x):\n        return -x\n")
        assert "defined twice" in str(error), prelude


def test_a_decided_if_binds_the_constants_of_the_branch_it_takes():
    """Written against round fifteen's version (red-team round 16): the constants a
    module-level ``if`` binds were taken from the first branch whose value kz could
    compute, whatever the test, so with ``MODE = 1`` the kernels saw the ``MODE == 0``
    branch's ``SCALE = 0.0`` where Python bound ``1.0``; and a ``k = triton.jit(fn)`` named
    ``__builtins__`` would have replaced the kernels' builtins."""
    source = """
        import triton
        import triton.language as tl

        MODE = 1
        if MODE == 0:
            SCALE = 0.0
        else:
            SCALE = 1.5

        @triton.jit
        def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, SCALE * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
    """
    x = torch.randn(37)
    torch.testing.assert_close(launch_unary(extract(source)["k"], x), 1.5 * x)
    error = refused("import triton\nimport triton.language as tl\ndef f(x):\n    return x\n__builtins__ = triton.jit(f)\n")
    assert "may not be named" in str(error)



ADD_BODY = """
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)
"""


def test_jit_alias_class_attribute_and_table_kernels():
    """Written against the version before (over-rejection probe 9): ``jit = triton.jit``
    then ``@jit`` was no kernel (the executor's ``kernel_not_in_source``), nor was
    ``_add`` in ``class Ops: add = triton.jit(_add)`` or ``{"add": triton.jit(_add)}``.
    The recording names such a kernel by its function's ``__qualname__``: ``_add``."""
    head = "import triton\nimport triton.language as tl\n"
    x = torch.randn(37)
    for layout in ("jit = triton.jit\nmy_jit = jit\n\n@my_jit\ndef _add(x_ptr, out_ptr, n, BLOCK: tl.constexpr):" + ADD_BODY,
                   "def _add(x_ptr, out_ptr, n, BLOCK: tl.constexpr):" + ADD_BODY + "\nclass Ops:\n    add = triton.jit(_add)\n",
                   "def _add(x_ptr, out_ptr, n, BLOCK: tl.constexpr):" + ADD_BODY + '\nKERNELS = {"add": [triton.jit(_add)]}\n'):
        kernels = extract(head + layout)
        assert sorted(kernels) == ["_add"], layout
        torch.testing.assert_close(launch_unary(kernels["_add"], x), x + 1.0)


def test_jit_alias_and_class_attribute_kernels_are_checked_and_not_overreached():
    """The new layouts only make more functions kernels, each checked by the allow-list;
    an alias bound twice is no jit, and a class attribute naming a class-local function
    (not the module's plain ``def``) registers nothing."""
    head = "import triton\nimport triton.language as tl\nimport os\n"
    bad = "def _add(x_ptr):\n    os.system('x')\n"
    assert "not allowed" in str(refused(head + bad + "\nclass Ops:\n    add = triton.jit(_add)\n"))
    assert "not allowed" in str(refused(head + bad + "\nT = (triton.jit(_add),)\n"))
    assert "not allowed" in str(refused(head + "jit = triton.jit\n@jit\n" + bad))
    assert extract(head + "jit = triton.jit\njit = print\n@jit\n" + bad) == {}
    shadowed = head + "def _add(x_ptr):\n    pass\n\nclass Ops:\n    def _add(self):\n        pass\n    add = triton.jit(_add)\n"
    assert extract(shadowed) == {}


PUBLISHED_IDIOMS = """
import triton
import triton.language as tl
from triton.language.standard import _log2


def _metadata(grid, kernel, args):
    # A profiler's name for the launch; it computes nothing.
    return {"name": f"add_{args['n']}"}


@triton.jit
def _less(a, b):
    return a < b


less = _less


@triton.jit(launch_metadata=_metadata)
def add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr, ACC: tl.constexpr = tl.float32):
    tl.static_assert(BLOCK >= 16, f"BLOCK={BLOCK} is too small")
    LOG_BLOCK: tl.constexpr = _log2(BLOCK)
    offs = tl.program_id(0) * (1 << LOG_BLOCK) + tl.arange(0, BLOCK)
    masks = [less(o, n) for o in (offs,)]
    if (m := masks[0]) is not None:
        total = tl.load(a_ptr + offs, mask=m).to(ACC) + tl.load(b_ptr + offs, mask=m).to(ACC)
        tl.store(out_ptr + offs, total.to(out_ptr.dtype.element_ty), mask=m)

"""


def test_idioms_of_published_kernels_are_built_and_run():
    """Over-rejection probe 20: a constexpr f-string in ``tl.static_assert``, a list
    comprehension and ``:=`` in a body, ``@triton.jit(launch_metadata=...)`` (Triton's
    persistent-matmul tutorial), a ``tl.float32`` constexpr default,
    ``triton.language.standard._log2`` (flash-linear-attention's bitonic argsort) and a
    helper reached through a module-level alias were refused by the builder; Triton 3.9
    compiles each for sm_90. Here on Triton's interpreter only (the GPU machine's Triton is
    older)."""
    kernels = extract(PUBLISHED_IDIOMS)
    a, b = torch.randn(3000), torch.randn(3000)
    out = torch.empty_like(a)
    kernels["add_kernel"][(triton.cdiv(3000, 1024),)](a, b, out, 3000, BLOCK=1024)
    assert torch.equal(out, a + b)


@pytest.mark.skipif(not hasattr(triton, "constexpr_function"), reason="this Triton has no constexpr_function")
def test_a_constexpr_function_is_checked_as_a_kernel_body_and_called_not_launched():
    """Over-rejection probe 20: ``@triton.constexpr_function`` helpers (Triton 3.5 and later)
    were refused by name. Their bodies run as Python when a kernel calls one, so each is
    checked as a kernel's body is: what a kernel may not reach, neither may it."""
    kernels = extract("""
        import triton
        import triton.language as tl

        @triton.constexpr_function
        def half(v):
            return v // 2

        @triton.jit
        def k(x_ptr, out_ptr, BLOCK: tl.constexpr):
            H: tl.constexpr = half(BLOCK)
            offs = tl.arange(0, H)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2)
    """)
    assert set(kernels) == {"k"}  # the helper is no kernel of the plan's
    x, out = torch.arange(8.0), torch.zeros(4)
    kernels["k"][(1,)](x, out, BLOCK=8)
    assert torch.equal(out, x[:4] * 2)
    for body in ("return open('/etc/passwd')", "return __import__('os')", "return v.__class__", "return torch.ones(v)"):
        error = refused(f"""
            import torch
            import triton
            import triton.language as tl

            @triton.constexpr_function
            def half(v):
                {body}

            @triton.jit
            def k(x_ptr, BLOCK: tl.constexpr):
                H: tl.constexpr = half(BLOCK)
        """)
        assert error.line == 8, (body, str(error))


@pytest.mark.skipif(not hasattr(triton, "constexpr_function"), reason="this Triton has no constexpr_function")
def test_a_constexpr_function_no_kernel_names_is_left_alone():
    """One used by host code only (any Python) is not the builder's: the module is built."""
    kernels = extract("""
        import triton
        import triton.language as tl

        @triton.constexpr_function
        def pick(config):
            return {"small": 16, "large": 64}[config]

        @triton.jit
        def k(x_ptr, BLOCK: tl.constexpr):
            tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)
    """)
    assert set(kernels) == {"k"} and "pick" not in kernels["k"].fn.__globals__


def test_a_comprehensions_variable_is_not_the_kernels_and_a_walrus_is():
    """Python scopes them so: a comprehension's variable is gone after it (refused where the
    kernel names it), a walrus in it binds the kernel's own name."""
    error = refused("""
        import triton
        import triton.language as tl

        @triton.jit
        def k(x_ptr, BLOCK: tl.constexpr):
            y = [i for i in range(3)]
            tl.store(x_ptr + i, 1.0)
    """)
    assert error.line == 8 and "'i'" in str(error)
    kernels = extract("""
        import triton
        import triton.language as tl

        @triton.jit
        def k(x_ptr, BLOCK: tl.constexpr):
            y = [(last := i) for i in range(3)]
            tl.store(x_ptr + last, 1.0)
    """)
    x = torch.zeros(4)
    kernels["k"][(1,)](x, BLOCK=4)
    assert x.tolist() == [0.0, 0.0, 1.0, 0.0]


def test_a_kernel_launched_from_a_kernels_body_is_a_compile_error_however_deep():
    """Triton's interpreter ran a launch made in a kernel's body (a kernel given as a
    constexpr); Triton compiles no such kernel for a GPU, and kz's executor refuses it as a
    compile error, also from a helper the kernel calls (the interpreter wraps the error once
    per call: red-team round 28)."""
    from kz_core import KernelCompileError

    from kz_backend_triton.kernels import TritonKernels

    source = textwrap.dedent("""
        import triton
        import triton.language as tl

        @triton.jit
        def inner(x):
            tl.store(x + tl.arange(0, 4), 1.0)

        @triton.jit
        def helper(x, K: tl.constexpr):
            K[(1,)](x)

        @triton.jit
        def direct(x, K: tl.constexpr):
            K[(1,)](x)

        @triton.jit
        def through_helper(x, K: tl.constexpr):
            helper(x, K)
    """)
    kernels = extract_kernels(source, f"<kz-test-source-{next(SOURCE_NAMES)}>")
    trusted = TritonKernels(kernels, source)
    for name in ("direct", "through_helper"):
        x = torch.zeros(4)
        with pytest.raises(KernelCompileError, match="launched the Triton kernel 'inner'"):
            trusted.launch({"kernel": {"name": name}, "grid": [1]}, [x, kernels["inner"]], {})
        assert not x.any()
    x = torch.zeros(4)
    trusted.launch({"kernel": {"name": "inner"}, "grid": [1]}, [x], {})  # the guard is left as it was
    assert x.tolist() == [1.0] * 4
