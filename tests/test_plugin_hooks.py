"""Every hook is documented in docs/plugin_hooks.md with a runnable example, and tested.

Each documented example is executed, registered as a plugin, and its hook is called
through the plugin manager with realistic arguments (datasette's
``test_plugin_hooks_are_documented``, extended to run the examples).
"""

from __future__ import annotations

import inspect
import re
import sys
import types
from pathlib import Path

import pytest
import torch

from kz_core import hookspecs
from kz_core.backend import CompiledCandidate, CompileFailure, RunOutput
from kz_core.config import load_config
from kz_core.model import (
    Candidate,
    ChatMessage,
    EvalResult,
    FrontierSelection,
    ModuleStats,
    Problem,
    Prompt,
    Tolerance,
    TrainingSummary,
    Verdict,
)
from kz_core.plugins import get_plugin_manager

REPO = Path(__file__).resolve().parents[1]
DOCS = (REPO / "docs" / "plugin_hooks.md").read_text()
HOOKS = {
    name: fn
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
    if getattr(fn, "kz_spec", None) is not None
}
HEADING = re.compile(r"^### (\w+)\(([^)]*)\)", re.MULTILINE)


def test_there_are_hooks():
    assert {"register_backends", "backend_compile", "shape_rewards", "select_frontier"} <= set(HOOKS)


def test_every_hook_is_documented_with_its_arguments():
    documented = {name: [a.strip() for a in args.split(",") if a.strip()] for name, args in HEADING.findall(DOCS)}
    for name, fn in HOOKS.items():
        assert name in documented, f"docs/plugin_hooks.md lacks a '### {name}(...)' section"
        assert documented[name] == list(inspect.signature(fn).parameters), f"{name}: documented arguments differ from the spec"
    assert set(documented) <= set(HOOKS), f"documented hooks that do not exist: {set(documented) - set(HOOKS)}"


def test_first_result_hooks_are_marked_in_the_docs():
    for name, fn in HOOKS.items():
        first_result = fn.kz_spec["firstresult"]
        heading = re.search(rf"^### {name}\(.*$", DOCS, re.MULTILINE).group(0)
        assert ("first result" in heading) == first_result, name
        assert ("Stops at the first non-None result" in " ".join((fn.__doc__ or "").split())) == first_result, name


def test_every_hook_spec_is_typed_and_documented():
    for name, fn in HOOKS.items():
        doc = inspect.getdoc(fn) or ""
        for parameter in inspect.signature(fn).parameters:
            assert f":param {parameter}:" in doc, f"{name} lacks :param {parameter}:"
        assert ":returns:" in doc, f"{name} lacks :returns:"
        assert all(p.annotation is not inspect.Parameter.empty for p in inspect.signature(fn).parameters.values()), name


def test_every_hook_has_its_own_test():
    """A test function whose name contains the hook's name, here or in any test file."""
    test_files = list(REPO.glob("tests/test_*.py")) + list(REPO.glob("plugins/*/tests/test_*.py"))
    test_names = {name for p in test_files for name in re.findall(r"^def (test_\w+)", p.read_text(), re.MULTILINE)}
    untested = [hook for hook in HOOKS if not any(hook in name for name in test_names)]
    assert not untested, f"hooks without a test named after them: {untested}"


def doc_example(hook: str) -> str:
    """The first python block after the hook's heading."""
    section = DOCS[DOCS.index(f"### {hook}(") :]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


@pytest.fixture
def example_plugin(tmp_path, monkeypatch):
    """Load a hook's documented example as a plugin module: written to a file and imported,
    as a plugin's module is (so that dataclasses and inspect find its source)."""
    import importlib

    pm = get_plugin_manager()
    registered = []
    monkeypatch.syspath_prepend(str(tmp_path))

    def load(hook: str):
        name = f"doc_example_{hook}"
        (tmp_path / f"{name}.py").write_text(doc_example(hook))
        module = importlib.import_module(name)
        pm.register(module, name=module.__name__)
        pm.check_pending()
        registered.append(module)
        return module

    yield load
    for module in registered:
        pm.unregister(module)
        sys.modules.pop(module.__name__, None)


def impls_of(hook, plugin):
    return [impl for impl in getattr(get_plugin_manager().hook, hook).get_hookimpls() if impl.plugin is plugin]


def test_doc_register_backends(example_plugin):
    from kz_core.plugins import backends

    example_plugin("register_backends")
    assert backends()["cutlass"].language == "cuda"


def test_doc_register_apis(example_plugin):
    from kz_core.plugins import apis

    example_plugin("register_apis")
    catalog = apis()
    assert catalog["torch.special.erf"].category == "elementwise"
    assert "torch.matmul" in catalog  # the shipped catalog is still there


def test_doc_register_problem_sources(example_plugin):
    from kz_core.problems import load_problems

    example_plugin("register_problem_sources")
    assert load_problems("inline:plus_one").names() == ["plus_one"]


def test_doc_register_commands(example_plugin):
    from click.testing import CliRunner

    from kz_core.cli import cli

    module = example_plugin("register_commands")
    group = type(cli)(name="kz-test")
    impls_of("register_commands", module)[0].function(cli=group)
    result = CliRunner().invoke(group, ["hello", "--name", "gemm", "run.seed=4"])
    assert result.exit_code == 0, result.output
    assert "hello gemm, seed 4" in result.output
    from kz_core import train_group

    try:
        assert "distill" in train_group.commands  # added to the core's `kz train` group
    finally:
        train_group.commands.pop("distill", None)


def test_doc_register_config(example_plugin):
    from kz_core.config import ConfigError, config_help, load_config

    example_plugin("register_config")
    assert load_config(None, ["cutlass.tile=64"]).cutlass.tile == 64
    with pytest.raises(ConfigError, match="power of two"):
        load_config(None, ["cutlass.tile=96"])
    assert config_help()["cutlass.tile"].startswith("Tile size of the GEMM templates")


def test_doc_static_checks(example_plugin):
    example_plugin("static_checks")
    pm = get_plugin_manager()
    problem = Problem(name="p", code="")
    results = pm.hook.static_checks(candidate=Candidate("p", "cutlass", "x = 1"), problem=problem)
    assert "no_cutlass" in [f.check for group in results for f in group]
    results = pm.hook.static_checks(candidate=Candidate("p", "cutlass", "s = 'cutlass::gemm'"), problem=problem)
    assert "no_cutlass" not in [f.check for group in results for f in group]


def test_doc_backend_compile_then_backend_run(example_plugin, tmp_path):
    example_plugin("backend_compile")
    example_plugin("backend_run")
    pm = get_plugin_manager()
    code = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
    compiled = pm.hook.backend_compile(candidate=Candidate("p", "cutlass", code), device="cpu", workdir=tmp_path)
    assert isinstance(compiled, CompiledCandidate)
    output = pm.hook.backend_run(compiled=compiled, model=compiled.model_class(), inputs=[torch.ones(3)])
    assert isinstance(output, RunOutput) and output.launches == 0
    assert torch.equal(output.outputs, torch.full((3,), 2.0))
    failure = pm.hook.backend_compile(candidate=Candidate("p", "cutlass", "def f(:"), device="cpu", workdir=tmp_path)
    assert isinstance(failure, CompileFailure) and failure.verdict is Verdict.FORMAT_ERROR and failure.line == 1
    # First result: a candidate of another backend is not answered by this plugin.
    other = Candidate("p", "no_such_backend", code)
    assert pm.hook.backend_compile(candidate=other, device="cpu", workdir=tmp_path) is None


def test_doc_backend_kernels(example_plugin, tmp_path):
    from kz_core.backend import TrustedKernels

    example_plugin("backend_kernels")
    pm = get_plugin_manager()
    code = 'GEMM_SRC = "extern \\"C\\" __global__ void gemm(float* c) {}"\nclass ModelNew: pass\n'
    kernels = pm.hook.backend_kernels(candidate=Candidate("p", "cutlass", code), device="cpu", workdir=tmp_path)
    assert isinstance(kernels, TrustedKernels) and kernels.backend == "cutlass" and "gemm" in kernels.sources
    with pytest.raises(RuntimeError, match="does not define"):
        kernels.launch({"kernel": {"name": "cublas_sgemm"}, "grid": [1]}, [], {})
    failure = pm.hook.backend_kernels(candidate=Candidate("p", "cutlass", "class ModelNew: pass\n"), device="cpu", workdir=tmp_path)
    assert isinstance(failure, CompileFailure)
    # First result: the core's own backends answer for theirs; an unknown backend gets None.
    assert pm.hook.backend_kernels(candidate=Candidate("p", "no_such_backend", code), device="cpu", workdir=tmp_path) is None


def test_doc_check_outputs(example_plugin):
    example_plugin("check_outputs")
    pm = get_plugin_manager()
    want = [torch.ones(4)]
    results = pm.hook.check_outputs(problem=Problem("p", ""), expected=want, actual=[torch.ones(4) * 1.1], tolerance=Tolerance(1e-4, 1e-4))
    assert "relative_norm" in [f.check for group in results for f in group]
    results = pm.hook.check_outputs(problem=Problem("p", ""), expected=want, actual=[torch.ones(4)], tolerance=Tolerance(1e-4, 1e-4))
    assert "relative_norm" not in [f.check for group in results for f in group]


def test_doc_sample_completions(example_plugin):
    example_plugin("sample_completions")
    config = load_config(None, ["policy.sampler=echo"]).policy
    prompts = [Prompt("a", (ChatMessage("user", "hi"),)), Prompt("b", (ChatMessage("user", "yo"),))]
    out = get_plugin_manager().hook.sample_completions(prompts=prompts, n=2, role="coder", config=config)
    assert [[c.text for c in group] for group in out] == [["hi", "hi"], ["yo", "yo"]]


def test_doc_shape_rewards(example_plugin):
    example_plugin("shape_rewards")
    config = load_config(None, ["reward.name=binary"]).reward
    results = [EvalResult("p", str(i), "triton", v) for i, v in enumerate([Verdict.CORRECT, Verdict.INCORRECT])]
    assert get_plugin_manager().hook.shape_rewards(role="coder", results=results, config=config) == [1.0, 0.0]


def test_doc_select_frontier(example_plugin):
    example_plugin("select_frontier")
    stats = [ModuleStats("always", samples=4, correct=4), ModuleStats("half", samples=4, correct=2), ModuleStats("never", samples=4, correct=0)]
    config = types.SimpleNamespace(name="half")
    selection = get_plugin_manager().hook.select_frontier(stats=stats, k=1, config=config)
    assert selection == FrontierSelection(modules=("half",), scores={"half": 0.25})


def test_doc_train_policy(example_plugin, tmp_path):
    import json

    example_plugin("train_policy")
    pm = get_plugin_manager()
    config = load_config(None, ["policy.sampler=echo", "policy.model=my-coder", "policy.proposer_model=my-proposer", "train.max_steps=3"])
    summary = pm.hook.train_policy(role="coder", items=[Problem("p", "")], config=config, run_dir=tmp_path / "coder")
    assert summary == TrainingSummary(role="coder", steps=3, seconds=0.0, model_path="my-coder")
    lines = [json.loads(line) for line in (tmp_path / "coder" / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2, 3] and lines[0]["items"] == 1
    summary = pm.hook.train_policy(role="proposer", items=[("torch.relu",)], config=config, run_dir=tmp_path / "proposer")
    assert summary.role == "proposer" and summary.model_path == "my-proposer"
    # First result: a config naming another sampler is not this plugin's to train.
    other = load_config(None, ["policy.sampler=nobody"])
    assert pm.hook.train_policy(role="coder", items=[], config=other, run_dir=tmp_path / "other") is None

