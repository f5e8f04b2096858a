"""Static guards: each named check fires on its hack and stays quiet on honest code."""

from __future__ import annotations

from pathlib import Path

import pytest

from kz_core.evaluate.guards import check_source
from kz_core.evaluate.judge import decide_verdict
from kz_core.model import Finding, Severity, Verdict

REPO = Path(__file__).resolve().parents[2]
HONEST = sorted((REPO / "examples" / "candidates" / "triton").glob("*.py"))

HEADER = "import torch\nimport torch.nn as nn\n"


def errors(code: str) -> list[str]:
    return [f.check for f in check_source(HEADER + code, "1_vector_add") if f.severity is Severity.ERROR]


@pytest.mark.parametrize("path", HONEST, ids=lambda p: p.stem)
def test_honest_example_candidates_pass_every_static_guard(path):
    assert check_source(path.read_text(), path.stem) == []


@pytest.mark.parametrize(
    ("code", "check"),
    [
        ("def broken(:\n", "syntax_error"),
        ("class Other(nn.Module):\n    pass\n", "no_model_new"),
        ("class ModelNew(Model):\n    pass\n", "reference_reuse"),
        ("class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.m = Model()\n", "reference_reuse"),
        ("import kz_problem_abc\nclass ModelNew(nn.Module):\n    pass\n", "reference_reuse"),
        ("class ModelNew(nn.Module):\n    def forward(self, x):\n        try:\n            return k(x)\n        except Exception:\n            return x + 1\n", "try_except_fallback"),
        ("torch.allclose = lambda *a, **k: True\nclass ModelNew(nn.Module):\n    pass\n", "monkeypatch"),
        ("import time\ntime.perf_counter = lambda: 0.0\nclass ModelNew(nn.Module):\n    pass\n", "monkeypatch"),
        ("setattr(torch, 'equal', lambda *a: True)\nclass ModelNew(nn.Module):\n    pass\n", "monkeypatch"),
        ("import sys\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return sys._getframe(1).f_locals['out']\n", "frame_inspection"),
        ("import gc\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return [o for o in gc.get_objects()][0]\n", "frame_inspection"),
        ("class ModelNew(nn.Module):\n    def forward(self, x):\n        torch.manual_seed(0)\n        return x\n", "seed_tampering"),
        ("class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n        torch.manual_seed(0)\n", "seed_tampering"),
        ("reseed = lambda: torch.manual_seed(0)\nclass ModelNew(nn.Module):\n    pass\n", "seed_tampering"),
        ("class ModelNew(nn.Module):\n    torch.manual_seed(0)\n", "seed_tampering"),
        ("torch.backends.cuda.matmul.allow_tf32 = True\nclass ModelNew(nn.Module):\n    pass\n", "global_flags"),
        ("torch.set_float32_matmul_precision('medium')\nclass ModelNew(nn.Module):\n    pass\n", "global_flags"),
        ("import threading\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        threading.Thread(target=print).start()\n        return x\n", "thread_or_stream"),
        ("class ModelNew(nn.Module):\n    def forward(self, x):\n        s = torch.cuda.Stream()\n        return x\n", "thread_or_stream"),
        ("src = 'cudaStreamCreate(&s);'\nclass ModelNew(nn.Module):\n    pass\n", "thread_or_stream"),
        ("src = 'attr.accessPolicyWindow.num_bytes = n;'\nclass ModelNew(nn.Module):\n    pass\n", "l2_persistence"),
    ],
)
def test_each_guard_catches_its_hack(code, check):
    assert check in errors(code)


def test_seeding_at_import_is_a_warning_not_a_rejection():
    """Triton's tutorials, and kernels published from them, seed torch at module level
    before their local tests. That runs once, when the candidate is loaded, before kz draws
    any input (from secret seeds; for the trials in another process): said, not rejected.
    Seeding in a function or class body, which can run between a draw's seeding and its
    draw, is still rejected (above; ``tests/cheats/triton/seed_at_import_regenerate.py`` is
    the import-time version of the regenerating cheat, wrong on kz's inputs)."""
    code = "import random\nimport numpy as np\ntorch.manual_seed(0)\nif True:\n    np.random.seed(1)\nfor _ in range(2):\n    random.seed(2)\nclass ModelNew(nn.Module):\n    pass\n"
    findings = check_source(HEADER + code, "1_vector_add")
    assert [f.check for f in findings] == ["seed_at_import"] * 3
    assert {f.severity for f in findings} == {Severity.WARNING}
    assert sorted(f.line for f in findings) == [5, 7, 9]
    assert decide_verdict(findings) is Verdict.CORRECT


def test_reraising_handlers_are_not_fallbacks():
    code = "class ModelNew(nn.Module):\n    def forward(self, x):\n        try:\n            return k(x)\n        except ValueError as e:\n            raise RuntimeError('bad') from e\n"
    assert errors(code) == []


@pytest.mark.parametrize(
    "handler",
    [
        "warnings.warn(str(e), RuntimeWarning)\n        raise",
        "logger.error('kernel failed on %s: %s', tuple(x.shape), e, exc_info=True)\n        raise RuntimeError('kernel failed') from e",
        "print(f'failed: {e!r}', type(e).__name__)\n        raise",
    ],
    ids=["warn", "log_and_raise_from", "print"],
)
def test_a_handler_that_logs_what_failed_and_raises_is_not_a_fallback(handler):
    """Published kernels log the failure (with its message, the shapes, the exception)
    and raise again: whatever such a handler logs, it cannot be returned. The version
    before accepted only plain values as the log call's arguments and rejected these as
    ``try_except_fallback``."""
    code = f"import warnings\nclass ModelNew(nn.Module):\n  def forward(self, x):\n    try:\n        return k(x)\n    except RuntimeError as e:\n        {handler}\n"
    assert errors(code) == []


@pytest.mark.parametrize(
    "handler",
    [
        "print(torch.relu(x))",
        "print(torch.relu(x))\n        return torch.relu(x)",
        "self.out = torch.relu(x)\n        raise",
        "print(self.out.copy_(torch.relu(x)))\n        raise",
        "logger.error('failed', extra=dict(out=torch.relu(x)))\n        raise",
    ],
    ids=["logs_without_raising", "logs_then_returns", "computes_then_raises", "computes_in_a_log_then_raises", "computes_in_a_keyword"],
)
def test_a_handler_that_computes_is_a_fallback_even_beside_a_log(handler):
    """Even in a handler that raises: a caller in the candidate's own code may catch it and
    return what the handler wrote (the replay would still see torch compute; this is the
    first filter)."""
    code = f"class ModelNew(nn.Module):\n  def forward(self, x):\n    try:\n        return k(x)\n    except RuntimeError as e:\n        {handler}\n"
    assert "try_except_fallback" in errors(code)


MODEL_WITH_FALLBACK = """
    class ModelNew(nn.Module):
        def forward(self, x):
            try:
                return k(x)
            except Exception:
                return torch.relu(x)
"""


@pytest.mark.parametrize(
    "code",
    [
        'if __name__ == "__main__":\n    pass\nelse:' + MODEL_WITH_FALLBACK,
        'if __name__ != "__main__":' + MODEL_WITH_FALLBACK,
        '__name__ = "__main__"\nif __name__ == "__main__":' + MODEL_WITH_FALLBACK,
    ],
    ids=["else_branch", "not_equal", "assigned_name"],
)
def test_only_a_real_main_block_is_skipped(code):
    assert "try_except_fallback" in errors(code)


def test_main_block_body_is_skipped():
    code = 'class ModelNew(nn.Module):\n    pass\nif __name__ == "__main__":\n    torch.manual_seed(0)\n'
    assert errors(code) == []


def test_import_guards_may_import_but_not_compute():
    guard = "try:\n    from triton.language.extra import libdevice\nexcept ImportError:\n    from triton.language.extra.cuda import libdevice\nclass ModelNew(nn.Module):\n    pass\n"
    assert errors(guard) == []
    fallback = "class ModelNew(nn.Module):\n    def forward(self, x):\n        try:\n            return k(x)\n        except ImportError:\n            return torch.relu(x)\n"
    assert "try_except_fallback" in errors(fallback)


def test_an_import_guard_may_chain_imports_and_choose_one_by_a_describing_test():
    """Written against over-rejection probe 16's version, which counted any ``try`` or
    ``if`` in a handler as computing: a chain of import fallbacks, and Inductor's choice of
    ``libdevice`` by ``hasattr`` inside ``except ImportError``, were rejected as fallbacks.
    A handler of another exception, or a chain that computes, still is."""
    chain = (
        "try:\n    from triton.language.extra import libdevice\nexcept ImportError:\n"
        "    try:\n        from triton.language.extra.cuda import libdevice\n    except ImportError:\n        from triton.language import math as libdevice\n"
    )
    chosen = (
        "try:\n    from triton.language.extra import libdevice\nexcept ImportError:\n"
        "    if hasattr(tl.extra, 'cuda') and hasattr(tl.extra.cuda, 'libdevice'):\n        libdevice = tl.extra.cuda.libdevice\n"
        "    else:\n        libdevice = tl.math\n"
    )
    model = "class ModelNew(nn.Module):\n    pass\n"
    assert errors(chain + model) == [] and errors(chosen + model) == []
    computes = chosen.replace("libdevice = tl.math", "libdevice = torch.relu(torch.ones(1))")
    assert "try_except_fallback" in errors(computes + model)
    tests_by_calling = chosen.replace("hasattr(tl.extra, 'cuda')", "torch.relu(x).sum() > 0")
    assert "try_except_fallback" in errors(tests_by_calling + model)
    other = chosen.replace("except ImportError", "except RuntimeError")
    assert "try_except_fallback" in errors(other + model)


def test_an_import_guard_may_define_a_shim_function():
    """Written against over-rejection probe 21's version: KernelBook's Inductor code run
    where torch lacks ``_cuda_getCurrentRawStream`` (a CPU build) needs ``except
    ImportError: def get_raw_stream(index): return 0``, which was rejected as a fallback.
    Defining runs nothing; a decorator that computes, or a def outside an import guard,
    still is one."""
    shim = (
        "try:\n    from torch._C import _cuda_getCurrentRawStream as get_raw_stream\nexcept ImportError:\n"
        "    def get_raw_stream(index):\n        return 0\n"
    )
    model = "class ModelNew(nn.Module):\n    pass\n"
    assert errors(shim + model) == []
    decorated = shim.replace("    def get_raw_stream", "    @functools.lru_cache(maxsize=None)\n    def get_raw_stream")
    assert errors(decorated + model) == []
    computing = shim.replace("    def get_raw_stream", "    @memo(torch.relu(torch.ones(1)))\n    def get_raw_stream")
    assert "try_except_fallback" in errors(computing + model)
    other = shim.replace("except ImportError", "except RuntimeError")
    assert "try_except_fallback" in errors(other + model)


def test_verdict_precedence():
    def f(check: str, severity: Severity = Severity.ERROR) -> Finding:
        return Finding(check, "", severity)

    assert decide_verdict([]) is Verdict.CORRECT
    assert decide_verdict([f("speed_of_light", Severity.WARNING)]) is Verdict.CORRECT
    assert decide_verdict([f("mismatch")]) is Verdict.INCORRECT
    assert decide_verdict([f("mismatch"), f("no_kernel_launch")]) is Verdict.REJECTED
    assert decide_verdict([f("no_kernel_launch"), f("timeout")]) is Verdict.TIMEOUT
    assert decide_verdict([f("compile_error"), f("runtime_error")]) is Verdict.COMPILE_ERROR
    assert decide_verdict([f("worker_died")]) is Verdict.RUNTIME_ERROR
    assert decide_verdict([f("syntax_error"), f("monkeypatch")]) is Verdict.FORMAT_ERROR
    assert decide_verdict([f("a_plugin_check")]) is Verdict.REJECTED
    assert decide_verdict([f("mismatch.relative_norm")]) is Verdict.INCORRECT


@pytest.mark.parametrize(
    "line",
    [
        "torch.backends.cuda.matmul.allow_tf32 = False",
        "torch.backends.cudnn.allow_tf32 = False",
        "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False",
        "torch.set_float32_matmul_precision('highest')",
    ],
)
def test_switching_a_reduced_precision_mode_off_is_noted_not_rejected(line):
    """Kernels published with their local tests switch TF32 off at module level for exact
    comparisons (the default for matmuls): nothing gets faster or less precise, and kz's
    trials replay in the executor with its own settings anyway. The version before
    rejected it as ``global_flags``."""
    findings = check_source(HEADER + line + "\nclass ModelNew(nn.Module):\n    pass\n", "1_vector_add")
    assert [(f.check, f.severity) for f in findings] == [("global_flags_strict", Severity.INFO)]


@pytest.mark.parametrize(
    "line",
    [
        "torch.backends.cuda.matmul.allow_tf32 = True",
        "torch.backends.cuda.matmul.allow_tf32 = ALLOW",
        "torch.backends.cudnn.benchmark = False",
        "torch.backends.cudnn.allow_tf32 |= False",
        "del torch.backends.cudnn.allow_tf32",
        "torch.set_float32_matmul_precision('high')",
        "torch.set_float32_matmul_precision(PRECISION)",
    ],
)
def test_every_other_flag_setting_is_still_rejected(line):
    assert "global_flags" in errors(line + "\nclass ModelNew(nn.Module):\n    pass\n")


SAVE_AND_RESTORE = """
class ModelNew(nn.Module):
    def forward(self, x):
        {save}
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        try:
            return x
        finally:
            {restore}
"""


@pytest.mark.parametrize(
    "save, restore",
    [
        ("old = torch.backends.cuda.matmul.allow_tf32; old_cudnn = torch.backends.cudnn.allow_tf32",
         "torch.backends.cuda.matmul.allow_tf32 = old; torch.backends.cudnn.allow_tf32 = old_cudnn"),
        ("old, old_cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32",
         "torch.backends.cuda.matmul.allow_tf32 = old; torch.backends.cudnn.allow_tf32 = old_cudnn"),
    ],
)
def test_a_flag_tightened_and_restored_to_its_own_value_is_noted_not_rejected(save, restore):
    """Written against the version before, which rejected a published ``load_inline``
    kernel as ``global_flags``: its forward reads TF32's flags, switches them off around
    its work and puts the values it read back in a ``finally``. Restoring a flag from a
    name bound once, to that flag's own value, leaves it as it was."""
    findings = check_source(HEADER + SAVE_AND_RESTORE.format(save=save, restore=restore), "1_vector_add")
    assert {(f.check, f.severity) for f in findings} == {("global_flags_strict", Severity.INFO)}, findings


@pytest.mark.parametrize(
    "save, restore",
    [
        ("old = torch.backends.cudnn.allow_tf32", "torch.backends.cuda.matmul.allow_tf32 = old"),  # another flag's value
        ("old = torch.backends.cuda.matmul.allow_tf32; old = True", "torch.backends.cuda.matmul.allow_tf32 = old"),  # rebound
        ("old = torch.backends.cuda.matmul.allow_tf32", "torch.backends.cudnn.benchmark = old"),
        # a parameter shadowing the saved name: the "restore" sets what the caller passes
        ("old = torch.backends.cuda.matmul.allow_tf32\n        def fast(old=True):\n            torch.backends.cuda.matmul.allow_tf32 = old\n        fast()", "pass"),
        ("old = torch.backends.cuda.matmul.allow_tf32\n        from os import sep as old", "torch.backends.cuda.matmul.allow_tf32 = old"),
    ],
)
def test_a_restore_from_anything_but_the_flags_own_value_is_still_rejected(save, restore):
    assert "global_flags" in errors(SAVE_AND_RESTORE.format(save=save, restore=restore))
