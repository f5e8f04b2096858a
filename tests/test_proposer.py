"""The Proposer: module validation (each rule caught by its check), the catalog's ops in real
profiler traces, the module pool, the learnability reward, `kz propose`, and the trainer's
reward function with scripted policies."""

from __future__ import annotations

import asyncio
import json
import math
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from kz_core import hookimpl
from kz_core.config import load_config
from kz_core.model import Completion, EvalResult, Finding, ModuleStats, Severity, Verdict
from kz_core.plugins import get_plugin_manager
from kz_core.proposer.catalog import api_catalog
from kz_core.proposer.pool import POOL_FILE, ModulePool, open_pool
from kz_core.proposer.reward import INVALID_REWARD, invalid_module_result, learnability, module_reward
from kz_core.proposer.similarity import fingerprint, similarity
from kz_core.proposer.validate import ModuleValidation, ModuleValidator, judge_measurements, validate_modules

REPO = Path(__file__).resolve().parents[1]
HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
FOOTER = "\n\nN = 32\n\n\ndef get_inputs():\n    return [torch.randn(N, N)]\n\n\ndef get_init_inputs():\n    return []\n"


def module(forward_body: str) -> str:
    """A KernelBench-format module whose forward(self, x) runs ``forward_body``."""
    return (
        HEADER
        + "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
        + "    def forward(self, x):\n"
        + "".join(f"        {line}\n" for line in forward_body.splitlines())
        + FOOTER
    )


VALID = module("y = torch.matmul(x, x)\nreturn torch.relu(y)")
#: VALID with every identifier renamed, a docstring and a comment added, other sizes.
VALID_RENAMED = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Matrix square, then ReLU."""

    def __init__(self):
        super().__init__()

    def forward(self, inp):
        # square the matrix
        product = torch.matmul(inp, inp)
        return torch.relu(product)


SIZE = 48


def get_inputs():
    return [torch.randn(SIZE, SIZE)]


def get_init_inputs():
    return []
'''
CHEATS = {
    # name: (code, requested APIs, the check that must reject it)
    "random_in_forward": (module("return torch.relu(x + torch.rand_like(x))"), ("torch.relu",), "nondeterministic"),
    "dropout_training": (module("return F.dropout(torch.relu(x), p=0.5, training=True)"), ("torch.relu",), "nondeterministic"),
    "constant_output": (module("return torch.add(x - x, 1.0)"), ("torch.add",), "constant_output"),
    "api_not_used": (module("return x * 2"), ("torch.matmul",), "api_not_used"),
    "non_finite": (module("return torch.log(x)"), ("torch.log",), "non_finite"),
    "does_not_run": (module("return torch.matmul(x, torch.ones(3, 3))"), ("torch.matmul",), "does_not_run"),
    "no_get_inputs": (VALID.replace("def get_inputs", "def make_inputs"), ("torch.matmul",), "format"),
    "no_code": (None, ("torch.matmul",), "format"),
}


def cpu_config(*overrides: str):
    return load_config(None, ["eval.device=cpu", "eval.workers=2", "eval.timing=false", *overrides])


@pytest.fixture(scope="module")
def validated() -> dict[str, ModuleValidation]:
    modules = [("valid", VALID, ("torch.matmul", "torch.relu")), ("loss", module("return F.mse_loss(torch.tanh(x), x)"), ("torch.nn.functional.mse_loss",))]
    modules += [(name, code, apis) for name, (code, apis, _) in CHEATS.items()]
    modules.append(("batch_copy", VALID_RENAMED, ("torch.matmul", "torch.relu")))  # a copy of "valid" in the same batch
    return {v.name: v for v in validate_modules(modules, cpu_config())}


def test_a_valid_module_is_accepted_with_measurements(validated):
    result = validated["valid"]
    assert result.valid and result.reason == "" and not [f for f in result.findings if f.severity is Severity.ERROR]
    assert result.runtime_ms is not None and result.runtime_ms > 0
    assert result.io_bytes == 2 * 32 * 32 * 4


def test_a_single_element_output_is_not_a_constant(validated):
    # A mean loss always equals its own mean: that guess must not make it "constant".
    assert validated["loss"].valid, validated["loss"].findings


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_each_invalid_module_is_rejected_by_its_check(validated, name):
    result = validated[name]
    expected = CHEATS[name][2]
    assert not result.valid
    assert result.reason == expected, result.findings
    assert all(f.message for f in result.findings)


def test_api_not_used_names_the_api_and_its_ops(validated):
    (finding,) = [f for f in validated["api_not_used"].findings if f.check == "api_not_used"]
    assert "torch.matmul" in finding.message and "aten::mm" in finding.message


def test_a_copy_of_an_earlier_module_of_the_batch_is_a_duplicate(validated):
    assert validated["batch_copy"].reason == "duplicate" and "'valid'" in validated["batch_copy"].findings[0].message


def test_a_renamed_copy_of_a_pool_module_is_a_duplicate(tmp_path, validated):
    with ModulePool(tmp_path / POOL_FILE) as pool, ModuleValidator(cpu_config()) as validator:
        pool.add(validated["valid"])
        (copy,) = validator.validate([("copy", VALID_RENAMED, ("torch.matmul", "torch.relu"))], pool)
        assert validator.pool.started == 0  # static checks need no worker
    assert copy.reason == "duplicate" and "'valid'" in copy.findings[0].message


def test_contamination_and_format(tmp_path):
    problem = (REPO / "examples" / "problems" / "6_linear_gelu.py").read_text()
    leaked = problem.replace("in_features", "d_in").replace("out_features", "d_out").replace("batch_size", "rows")
    with ModuleValidator(cpu_config("proposer.decontaminate=examples")) as validator:
        first, second, third = validator.validate([("a", leaked, ("torch.nn.Linear",)), ("b", "x = (", ()), ("c", "import torch\n", ())])
        assert validator.pool.started == 0
        assert first.reason == "contaminated" and "6_linear_gelu" in first.findings[0].message
        assert second.reason == "format" and "syntax error" in second.findings[0].message
        assert third.reason == "format" and "no module-level class Model" in third.findings[0].message


def test_similarity_ignores_names_comments_and_sizes_but_not_apis():
    assert similarity(fingerprint(VALID), fingerprint(VALID_RENAMED)) == 1.0
    tanh = VALID.replace("torch.relu", "torch.tanh")
    assert 0.5 < similarity(fingerprint(VALID), fingerprint(tanh)) < 0.9
    assert similarity(fingerprint(VALID), fingerprint("x = (")) == 0.0
    unrelated = (REPO / "examples" / "problems" / "3_row_softmax.py").read_text()
    assert similarity(fingerprint(VALID), fingerprint(unrelated)) < 0.6


def reply(runtime_ms: float = 1.0, input_bytes: int = 16, output_bytes: int = 16, clock: str = "cpu") -> dict:
    outputs = {"first": [torch.arange(4.0)], "second": [torch.arange(4.0) + 1], "again": [torch.arange(4.0)]}
    return {
        "ok": True,
        "input_bytes": input_bytes,
        "output_bytes": output_bytes,
        "first_call_ms": runtime_ms,
        "runs": {key: {"structure": "tensor", "outputs": value} for key, value in outputs.items()},
        "op_names": ["aten::relu"],
        "runtime": {"median_ms": runtime_ms, "iqr_ms": 0.0, "min_ms": runtime_ms, "trials": 3, "clock": clock},
    }


def test_runtime_window_and_memory_limit():
    config = load_config(None, ["proposer.min_runtime_ms=0.5", "proposer.max_runtime_ms=10", "proposer.max_memory_mb=1"])
    catalog = api_catalog()

    def checks(measured: dict) -> list[str]:
        return [f.check for f in judge_measurements(measured, ["torch.relu"], catalog, config.proposer, config.eval)]

    assert checks(reply(1.0)) == []
    assert checks(reply(20.0)) == ["too_slow"]
    assert checks(reply(0.1)) == ["too_fast"]
    assert checks(reply(1.0, output_bytes=2 << 20)) == ["too_much_memory"]


# -- the catalog's ops appear in real profiler traces -----------------------------------

#: One small call per API (a sample covering every category), run in this process: these
#: are trusted test modules.
API_CALLS = {
    "torch.add": lambda x: torch.add(x, x),
    "torch.exp": lambda x: torch.exp(x),
    "torch.clamp": lambda x: torch.clamp(x, -0.5, 0.5),
    "torch.where": lambda x: torch.where(x > 0, x, -x),
    "torch.relu": lambda x: torch.relu(x),
    "torch.nn.functional.gelu": lambda x: torch.nn.functional.gelu(x),
    "torch.nn.functional.softplus": lambda x: torch.nn.functional.softplus(x),
    "torch.sum": lambda x: torch.sum(x, dim=1),
    "torch.amax": lambda x: torch.amax(x, dim=1),
    "torch.var": lambda x: torch.var(x, dim=1),
    "torch.linalg.vector_norm": lambda x: torch.linalg.vector_norm(x, dim=1),
    "torch.matmul": lambda x: torch.matmul(x, x),
    "torch.nn.Linear": lambda x: torch.nn.Linear(8, 4)(x),
    "torch.einsum": lambda x: torch.einsum("ij,jk->ik", x, x),
    "torch.nn.Conv2d": lambda x: torch.nn.Conv2d(1, 2, 3)(x.reshape(1, 1, 8, 8)),
    "torch.nn.functional.max_pool2d": lambda x: torch.nn.functional.max_pool2d(x.reshape(1, 1, 8, 8), 2),
    "torch.nn.functional.adaptive_avg_pool2d": lambda x: torch.nn.functional.adaptive_avg_pool2d(x.reshape(1, 1, 8, 8), 2),
    "torch.nn.LayerNorm": lambda x: torch.nn.LayerNorm(8)(x),
    "torch.nn.BatchNorm2d": lambda x: torch.nn.BatchNorm2d(1).eval()(x.reshape(1, 1, 8, 8)),
    "torch.nn.functional.rms_norm": lambda x: torch.nn.functional.rms_norm(x, (8,)),
    "torch.softmax": lambda x: torch.softmax(x, dim=1),
    "torch.nn.functional.cross_entropy": lambda x: torch.nn.functional.cross_entropy(x, torch.zeros(8, dtype=torch.long)),
    "torch.nn.functional.mse_loss": lambda x: torch.nn.functional.mse_loss(x, x * 0.5),
    "torch.cumsum": lambda x: torch.cumsum(x, dim=1),
    "torch.gather": lambda x: torch.gather(x, 1, torch.zeros(8, 2, dtype=torch.long)),
    "torch.topk": lambda x: torch.topk(x, 2),
    "torch.nn.functional.scaled_dot_product_attention": lambda x: torch.nn.functional.scaled_dot_product_attention(*[x.reshape(1, 1, 8, 8)] * 3),
}


def test_api_calls_cover_every_category_of_the_catalog():
    catalog = api_catalog()
    assert set(API_CALLS) <= set(catalog)
    assert {catalog[name].category for name in API_CALLS} == {spec.category for spec in catalog.values()}


@pytest.mark.parametrize("api", sorted(API_CALLS))
def test_catalog_ops_appear_in_a_cpu_profiler_trace(api):
    from torch.profiler import ProfilerActivity, profile

    spec = api_catalog()[api]
    x = torch.randn(8, 8)
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as trace:
        API_CALLS[api](x)
    seen = {event.name for event in trace.events()}
    assert seen & set(spec.ops), f"{api}: none of {spec.ops} in {sorted(seen)}"


# -- the pool ---------------------------------------------------------------------------


def result(problem: str, verdict: Verdict, speedup: float | None = None) -> EvalResult:
    return EvalResult(problem, "0", "triton", verdict, speedups={"eager": speedup} if speedup else {})


def test_pool_round_trip_stats_and_provenance(tmp_path):
    bad = ModuleValidation("m", "x = (", ("torch.add",), False, (Finding("format", "syntax error"),))
    good = ModuleValidation("m", VALID, ("torch.matmul", "torch.relu"), True, runtime_ms=0.2, io_bytes=8192)
    other = ModuleValidation("n", VALID_RENAMED, ("torch.relu",), True)
    with open_pool(tmp_path) as pool:
        assert pool.next_round() == 0 and len(pool) == 0
        assert pool.add(bad, round=0, checkpoint="ckpt-a") == "m"
        assert pool.add(good, round=1, checkpoint="ckpt-b") == "m_2"
        assert pool.add(other, round=1) == "n"
        pool.record("m_2", [result("m_2", Verdict.CORRECT, 1.5), result("m_2", Verdict.INCORRECT), result("m_2", Verdict.CORRECT, 2.5)])
        pool.record("m_2", [result("m_2", Verdict.CORRECT, 2.0)])
        with pytest.raises(KeyError, match="no module named 'zzz'"):
            pool.record("zzz", [])
    with ModulePool(tmp_path / POOL_FILE) as pool:  # everything was committed
        assert len(pool) == 3 and pool.next_round() == 2
        assert pool.stats() == [ModuleStats("m_2", ("torch.matmul", "torch.relu"), 4, 3, 2.5), ModuleStats("n", ("torch.relu",), 0, 0, None)]
        assert [p.name for p in pool.valid_problems()] == ["m_2", "n"] and pool.valid_problems()[0].code == VALID
        (invalid,) = pool.entries(valid=False)
        assert invalid.reason == "format" and invalid.findings == bad.findings and invalid.checkpoint == "ckpt-a"
        entry = pool.get("m_2")
        assert entry.round == 1 and entry.checkpoint == "ckpt-b" and entry.runtime_ms == 0.2 and entry.io_bytes == 8192
        assert pool.reasons() == {"format": 1}
        assert [name for name, _ in pool.fingerprints()] == ["m_2", "n"]


# -- the learnability reward ------------------------------------------------------------


def coder_results(n: int, correct: int) -> list[EvalResult]:
    return [result("m", Verdict.CORRECT if i < correct else Verdict.INCORRECT) for i in range(n)]


@given(n=st.integers(1, 32), data=st.data(), kind=st.sampled_from(["absolute_zero", "r_zero"]))
@settings(max_examples=200, deadline=None)
def test_learnability_rewards_are_finite_bounded_and_above_invalid(n, data, kind):
    correct = data.draw(st.integers(0, n))
    reward = module_reward(coder_results(n, correct), kind)
    assert math.isfinite(reward) and -1.0 <= reward <= 1.0
    assert reward > INVALID_REWARD
    assert module_reward([invalid_module_result("m", (Finding("format", "no code"),))], kind) == INVALID_REWARD


@given(half=st.integers(1, 16), kind=st.sampled_from(["absolute_zero", "r_zero"]))
def test_never_or_always_solved_is_never_above_half_solved(half, kind):
    n = 2 * half
    middle = module_reward(coder_results(n, half), kind)
    assert module_reward(coder_results(n, 0), kind) <= middle
    assert module_reward(coder_results(n, n), kind) <= middle


def test_learnability_values():
    assert learnability(0.25, "absolute_zero") == 0.75 and learnability(0.0) == 0.0 and learnability(1.0) == 0.0
    assert learnability(0.5, "r_zero") == 1.0 and learnability(0.25, "r_zero") == 0.5
    with pytest.raises(ValueError, match="proposer.learnability='easy'"):
        learnability(0.5, "easy")


def test_shape_rewards_answers_the_proposer_role_before_coder_rewards():
    pm = get_plugin_manager()
    config = load_config(None, ["proposer.learnability=r_zero"])
    # The Proposer's section reaches this plugin first; kz-reward-cagrpo never sees it.
    assert pm.hook.shape_rewards(role="proposer", results=coder_results(4, 2), config=config.proposer) == [1.0] * 4
    assert pm.hook.shape_rewards(role="proposer", results=[invalid_module_result("m")], config=config.proposer) == [-1.0]
    assert pm.hook.shape_rewards(role="proposer", results=[], config=config.proposer) == [0.0]
    from kz_core.proposer.reward import shape_rewards

    other = load_config(None, ["proposer.reward=something_else"]).proposer
    assert shape_rewards(role="proposer", results=coder_results(2, 1), config=other) is None
    assert shape_rewards(role="coder", results=coder_results(2, 1), config=config.reward) is None


# -- kz propose -------------------------------------------------------------------------


def scripted_module(apis: list[str]) -> str:
    """A valid module calling each (unary, elementwise) API in turn."""
    return module("".join(f"x = {api}(x)\n" for api in apis) + "return x")


class ScriptedProposer:
    """Proposes, in turn: a valid module for the APIs asked, a nondeterministic one, prose."""

    @hookimpl
    def sample_completions(self, prompts, n, role, config):
        if config.sampler != "scripted" or role != "proposer":
            return None
        replies = []
        for index, prompt in enumerate(prompts):
            apis = prompt.prompt_id.removeprefix("apis:").split("+")
            valid = scripted_module(apis)
            random_ops = valid.replace("return x", "return x + torch.rand_like(x)")
            options = [f"```python\n{valid}```", f"```python\n{random_ops}```", "A module? Sure."]
            replies.append([Completion(prompt.prompt_id, role, options[index % 3], i) for i in range(n)])
        return replies


def test_kz_propose_validates_and_reports_reasons(register_plugin, monkeypatch, tmp_path):
    from kz_core.cli import _register_commands, cli
    from kz_core.proposer import catalog as catalog_module

    unary = {name: spec for name, spec in api_catalog().items() if name in ("torch.relu", "torch.tanh", "torch.sigmoid", "torch.exp")}
    monkeypatch.setattr(catalog_module, "api_catalog", lambda: unary)
    register_plugin(ScriptedProposer(), "scripted-proposer")
    _register_commands()
    arguments = ["propose", "--n", "3", "--device", "cpu", "--json", f"run.root={tmp_path}", "run.name=p", "policy.sampler=scripted", "eval.workers=2", "proposer.max_apis=2"]
    outcome = CliRunner().invoke(cli, arguments, catch_exceptions=False)
    assert outcome.exit_code == 0, outcome.output
    summary = json.loads(outcome.stdout[outcome.stdout.index("{"):])
    assert summary["proposed"] == 3 and summary["valid"] == 1 and summary["valid_share"] == pytest.approx(1 / 3)
    assert summary["invalid_by_reason"] == {"nondeterministic": 1, "format": 1}
    assert summary["catalog_size"] == 4 and 1 <= summary["apis_covered"] <= summary["apis_requested"] <= 4
    with open_pool(tmp_path / "p") as pool:
        assert len(pool) == 3 and [e.round for e in pool.entries()] == [0, 0, 0] and len(pool.valid_problems()) == 1
    records = [json.loads(line) for line in (tmp_path / "p" / "modules.jsonl").read_text().splitlines()]
    assert [r["reason"] for r in records] == ["", "nondeterministic", "format"]
    assert records[2]["findings"][0]["message"].startswith("no code: no fenced python code block")


@pytest.mark.slow
def test_kz_propose_with_the_tiny_model_fills_a_pool(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "COLUMNS": "200"}
    completed = subprocess.run(
        [sys.executable, "-m", "kz_core.cli", "propose", "--n", "3", "--device", "cpu", f"run.root={tmp_path}", "run.name=tiny",
         "policy.model=embedded:tiny", "policy.max_new_tokens=24", "eval.workers=1"],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "valid" in completed.stdout and "invalid: format" in completed.stdout and "APIs requested" in completed.stdout
    with open_pool(tmp_path / "tiny") as pool:
        assert len(pool) == 3 and pool.reasons() == {"format": 3}  # a random model writes noise


# -- the Proposer's reward function for TRL ---------------------------------------------

SCALED_RELU = (REPO / "examples" / "problems" / "2_scaled_relu.py").read_text()
KERNEL = (REPO / "examples" / "candidates" / "triton" / "2_scaled_relu.py").read_text()


class ScriptedCoder:
    """A Coder that answers with a correct kernel for its first sample, prose for the second."""

    @hookimpl
    def sample_completions(self, prompts, n, role, config):
        if config.sampler != "scripted" or role != "coder":
            return None
        replies = [f"```python\n{KERNEL}```", "No kernel today."]
        return [[Completion(p.prompt_id, role, replies[i % 2], i) for i in range(n)] for p in prompts]


@pytest.mark.triton
def test_proposer_reward_validates_samples_the_coder_and_shapes_learnability(register_plugin, tmp_path):
    from kz_core.rewards import ProposerReward

    register_plugin(ScriptedCoder(), "scripted-coder")
    config = cpu_config("policy.sampler=scripted", "proposer.coder_samples=2", "eval.trials=2", "proposer.repetition_penalty=0.5")
    dropout = SCALED_RELU.replace("torch.relu(x) * self.scale", "torch.nn.functional.dropout(torch.relu(x), 0.5, True) * self.scale")
    completions = [
        [{"role": "assistant", "content": f"```python\n{SCALED_RELU}```"}],
        [{"role": "assistant", "content": "I cannot write modules."}],
        [{"role": "assistant", "content": f"```python\n{dropout}```"}],
    ]
    reward = ProposerReward(config, tmp_path / POOL_FILE)
    clone = pickle.loads(pickle.dumps(reward))
    assert clone._validator is None and clone._pool is None and clone.pool_path == reward.pool_path
    try:
        rewards = asyncio.run(reward(prompts=[None] * 3, completions=completions, apis=["torch.mul+torch.relu"] * 3))
    finally:
        reward.close()
    repeated = similarity(fingerprint(SCALED_RELU), fingerprint(dropout))
    # Half the Coder's samples correct: absolute_zero learnability 1 - 1/2, minus the penalty.
    assert rewards == pytest.approx([0.5 - 0.5 * repeated, -1.0, -1.0])
    entry = reward.step_log[-1]
    assert entry["valid_share"] == pytest.approx(1 / 3) and entry["invalid_by_reason"] == {"format": 1, "nondeterministic": 1}
    assert entry["coder_correct_rate"] == 0.5
    with open_pool(tmp_path) as pool:
        assert len(pool) == 3
        (stats,) = pool.stats()
        assert (stats.samples, stats.correct, stats.apis) == (2, 1, ("torch.mul", "torch.relu"))


@pytest.mark.slow
def test_kz_train_proposer_smoke_run_fills_the_pool_and_logs_metrics(tmp_path):
    pytest.importorskip("kz_policy_hf")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    completed = subprocess.run(
        [sys.executable, "-m", "kz_core.cli", "train", "proposer", "--preset", "smoke", f"run.root={tmp_path}", "run.name=tp"],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    metrics = [json.loads(line) for line in (tmp_path / "tp" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    for m in metrics:  # a tiny random model writes no module: every one is a format error
        assert m["reward"] == -1.0 and m["valid_share"] == 0.0 and m["invalid_by_reason"] == {"format": 2}
    with open_pool(tmp_path / "tp") as pool:
        assert len(pool) == 4 and {e.checkpoint for e in pool.entries()} == {"training call 1", "training call 2"}
    assert (tmp_path / "tp" / "final").is_dir()


def test_an_unknown_isolation_mechanism_stops_the_validator_without_leaving_its_zygote(tmp_path):
    import os
    from pathlib import Path

    from kz_core.config import load_config
    from kz_core.proposer.validate import ModuleValidator

    def children() -> set[str]:  # this process's child processes, from every thread
        return {c for t in Path(f"/proc/{os.getpid()}/task").iterdir() for c in (t / "children").read_text().split()}

    before = children()
    with pytest.raises(ValueError, match="eval.isolation_off: unknown isolation mechanism"):
        ModuleValidator(load_config(None, ["eval.device=cpu", "eval.isolation_off=[nonsense]", f"eval.scratch_dir={tmp_path}"]))
    assert children() <= before
    assert list(tmp_path.iterdir()) == []  # nor a scratch folder: the version before left one
