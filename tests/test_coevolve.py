"""Co-evolution (`kz train`): the loop with scripted policies and real evaluations, the smoke
preset end to end with `kz report`, and resuming after a SIGKILL mid-round."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kz_core import hookimpl
from kz_core.coevolve import PHASES, STATE_FILE, Coevolution, finished_phases, load_state, read_rounds, save_state
from kz_core.config import load_config
from kz_core.evaluate.journal import Journal
from kz_core.model import Completion, TrainingSummary
from kz_core.proposer.pool import open_pool
from kz_core.report import load_run

REPO = Path(__file__).resolve().parents[1]
SCALED_RELU = (REPO / "examples" / "problems" / "2_scaled_relu.py").read_text()
RELU_KERNEL = (REPO / "examples" / "candidates" / "triton" / "2_scaled_relu.py").read_text()
ADD_KERNEL = (REPO / "examples" / "candidates" / "triton" / "1_vector_add.py").read_text()
def subprocess_env() -> dict[str, str]:
    """This process's environment as it is now (a fixture may have changed KZ_CACHE_DIR, and
    the journal's signatures must check in both processes), offline."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "COLUMNS": "200"}


class ScriptedPolicies:
    """A Proposer that writes the scaled-ReLU module (or prose), a Coder that answers with an
    honest kernel for its first sample and prose for its second, and a trainer that trains
    nothing but writes what a trainer writes."""

    def __init__(self):
        self.trained: list[tuple[str, int, str, str, int]] = []

    @hookimpl
    def sample_completions(self, prompts, n, role, config):
        if config.sampler != "scripted":
            return None
        if role == "proposer":
            replies = [f"```python\n{SCALED_RELU}```", "A module? Not today."]
            return [[Completion(p.prompt_id, role, replies[i % 2], j) for j in range(n)] for i, p in enumerate(prompts)]
        groups = []
        for p in prompts:
            kernel = ADD_KERNEL if "vector_add" in p.prompt_id else RELU_KERNEL
            groups.append([Completion(p.prompt_id, role, f"```python\n{kernel}```" if j % 2 == 0 else "No kernel.", j) for j in range(n)])
        return groups

    @hookimpl
    def train_policy(self, role, items, config, run_dir):
        if config.policy.sampler != "scripted":
            return None
        model = config.policy.proposer_model if role == "proposer" else config.policy.model
        self.trained.append((role, config.train.max_steps, model, Path(run_dir).parent.name, len(items)))
        (Path(run_dir) / "final").mkdir(parents=True, exist_ok=True)
        with (Path(run_dir) / "metrics.jsonl").open("a") as handle:
            for step in range(1, config.train.max_steps + 1):
                handle.write(json.dumps({"step": step, "loss": 0.0, "reward": 0.5, "correct_rate": 0.5}) + "\n")
        return TrainingSummary(role=role, steps=config.train.max_steps, seconds=0.0, model_path=str(Path(run_dir) / "final"))


def scripted_config(tmp_path: Path, *overrides: str):
    heldout = tmp_path / "heldout"
    heldout.mkdir(exist_ok=True)
    (heldout / "1_vector_add.py").write_text((REPO / "examples" / "problems" / "1_vector_add.py").read_text())
    return load_config("smoke", [
        "policy.sampler=scripted", "policy.model=base", "eval.trials=2", "eval.workers=2", "problems.ids=1",
        f"coevolve.heldout_source={heldout}", "coevolve.heldout_ids=", "coevolve.rounds=2", "proposer.min_apis=2", "proposer.max_apis=2", *overrides,
    ])


@pytest.fixture
def small_catalog(monkeypatch):
    """Only the two APIs the scripted module uses, so that it passes `api_not_used`."""
    from kz_core.proposer import catalog as catalog_module

    catalog = {name: spec for name, spec in catalog_module.api_catalog().items() if name in ("torch.relu", "torch.mul")}
    monkeypatch.setattr(catalog_module, "api_catalog", lambda: catalog)


@pytest.mark.slow
@pytest.mark.triton
def test_rounds_with_scripted_policies_fill_the_pool_train_and_evaluate(register_plugin, small_catalog, tmp_path):
    policies = register_plugin(ScriptedPolicies(), "scripted-policies")
    config = scripted_config(tmp_path)
    rounds = Coevolution(config, tmp_path / "run").run()
    run = tmp_path / "run"

    # The seed 1_vector_add is the held-out problem: it is left out of the pool.
    with open_pool(run) as pool:
        entries = pool.entries()
        assert [e.name for e in entries] == ["r001_000", "r001_001", "r002_000", "r002_001"]
        assert [e.reason for e in entries] == ["", "format", "duplicate", "format"]
        (stats,) = pool.stats()
        assert (stats.samples, stats.correct) == (2, 1)  # evaluated once: one honest kernel, one reply without code
    # Separate checkpoints: each role trains from its own latest model.
    assert [t[:4] for t in policies.trained] == [
        ("proposer", 1, "base", "1"), ("coder", 2, "base", "1"),
        ("proposer", 1, str(run / "rounds/1/proposer/final"), "2"), ("coder", 2, str(run / "rounds/1/coder/final"), "2"),
    ]
    assert len(rounds) == 2 and [r["round"] for r in rounds] == [1, 2]
    first, second = rounds
    assert first["pool_size"] == 2 and first["pool_valid"] == 1 and second["pool_size"] == 4
    assert first["frontier"]["modules"] == ["r001_000"] and first["frontier"]["intermediate_share"] == 1.0
    assert first["frontier"]["api_coverage"] == 1.0  # both APIs of the (small) catalog are covered
    assert first["heldout"]["pass@1"] == 0.5 and first["heldout"]["pass@k"] == 1.0
    assert first["heldout"]["fast_1_eager"] is None  # no speedup is measured on a CPU
    assert set(first["heldout"]["by_backend"]) == {"triton"}
    # The same completions in round 2: their evaluations come back from the journal.
    assert first["heldout_samples"]["reused"] == 0 and second["heldout_samples"]["reused"] == 2
    assert second["models"] == {"coder": str(run / "rounds/2/coder/final"), "proposer": str(run / "rounds/2/proposer/final")}
    state = load_state(run, config)
    assert finished_phases(state, 2) == list(PHASES)
    # Nothing left to do: a re-run trains and evaluates nothing and appends no round.
    Coevolution(config, run).run()
    assert len(policies.trained) == 4 and len(read_rounds(run)) == 2
    data = load_run(run)
    assert {s["phase"] for s in data.steps} == {"coder", "proposer"}


@pytest.mark.slow
@pytest.mark.triton
def test_expert_iteration_fine_tunes_the_coder_on_its_correct_samples(register_plugin, small_catalog, tmp_path):
    policies = register_plugin(ScriptedPolicies(), "scripted-policies")
    config = scripted_config(tmp_path, "coevolve.rounds=1", "coevolve.expert_samples=2")
    Coevolution(config, tmp_path / "run").run()
    run = tmp_path / "run"
    roles = [(t[0], t[2], t[4]) for t in policies.trained]
    # The scripted Coder answers one of its two samples with an honest kernel: one pair.
    assert ("coder_sft", "base", 1) in roles
    expert = str(run / "rounds/1/expert/sft/final")
    assert ("coder", expert, 1) in roles, roles  # GRPO starts from the fine-tuned model
    state = load_state(run, config)
    record = state["rounds"]["1"]["expert"]
    assert record["samples"] == 2 and record["correct"] == 1 and record["model_path"] == expert


def test_shared_model_trains_one_lineage(register_plugin, tmp_path, monkeypatch):
    policies = register_plugin(ScriptedPolicies(), "scripted-policies")
    config = scripted_config(tmp_path, "coevolve.shared_model=true", "coevolve.modules_per_round=0", "coevolve.seed_problems=false", "coevolve.heldout_samples=1")
    coevolution = Coevolution(config, tmp_path / "run")
    monkeypatch.setattr(Coevolution, "phase_heldout", lambda self, r: {})
    monkeypatch.setattr(Coevolution, "phase_frontier", lambda self, r: {"modules": []})
    coevolution.run()
    run = tmp_path / "run"
    # No frontier modules: the Coder is not trained; the Proposer trains the shared model.
    assert [t[:3] for t in policies.trained] == [("proposer", 1, "base"), ("proposer", 1, str(run / "rounds/1/proposer/final"))]
    assert load_state(run, config)["models"] == {"coder": str(run / "rounds/2/proposer/final"), "proposer": str(run / "rounds/2/proposer/final")}
    assert load_state(run, config)["rounds"]["1"]["coder"]["skipped"] == "no modules on the frontier"


def test_state_is_written_atomically(tmp_path):
    config = load_config("smoke")
    state = load_state(tmp_path, config)
    assert state["models"] == {"coder": "embedded:tiny", "proposer": "embedded:tiny"} and state["rounds"] == {}
    state["rounds"]["1"] = {"proposer": {"steps": 1}}
    save_state(tmp_path, state)
    assert finished_phases(load_state(tmp_path, config), 1) == ["proposer"]
    assert [p.name for p in tmp_path.iterdir()] == [STATE_FILE]  # no temporary file left behind


def test_a_missing_trainer_or_held_out_set_is_a_clear_error(tmp_path):
    from click.testing import CliRunner

    from kz_core.cli import _register_commands, cli

    _register_commands()
    outcome = CliRunner().invoke(cli, ["train", "--preset", "smoke", f"run.root={tmp_path}", "coevolve.heldout_ids=99"])
    assert outcome.exit_code == 2 and "no held-out problems" in outcome.output
    outcome = CliRunner().invoke(cli, ["train", "--preset", "smoke", f"run.root={tmp_path}", "policy.sampler=nobody", "coevolve.seed_problems=false"])
    assert outcome.exit_code == 2 and "no installed plugin trains policies with policy.sampler='nobody'" in outcome.output


# -- the smoke preset, as a user runs it -----------------------------------------------------


def kz_train(tmp_path: Path, **kwargs) -> subprocess.Popen | subprocess.CompletedProcess:
    command = [sys.executable, "-m", "kz_core.cli", "train", "--preset", "smoke", f"run.root={tmp_path}", "run.name=smoke"]
    return subprocess.run(command, capture_output=True, text=True, env=subprocess_env(), cwd=tmp_path, **kwargs)


@pytest.mark.slow
def test_kz_train_smoke_preset_completes_a_round_and_kz_report_renders_it(tmp_path):
    completed = kz_train(tmp_path)
    assert completed.returncode == 0, completed.stderr[-3000:]
    run = tmp_path / "smoke"
    (line,) = read_rounds(run)
    assert line["round"] == 1 and line["pool_valid"] == 2 and line["pool_size"] == 4  # two seeds, two noise modules
    assert line["heldout"]["pass@1"] == 0.0 and line["heldout_samples"] == {"problems": 2, "per_problem": 2, "results": 4, "reused": 0}
    for phase, steps in (("proposer", [1]), ("coder", [1, 2])):
        metrics = [json.loads(x) for x in (run / "rounds" / "1" / phase / "metrics.jsonl").read_text().splitlines()]
        assert [m["step"] for m in metrics] == steps
    assert "report/index.html" in completed.stderr and "co-evolution rounds" in completed.stdout
    report = subprocess.run([sys.executable, "-m", "kz_core.cli", "report", str(run)], capture_output=True, text=True, env=subprocess_env())
    assert report.returncode == 0, report.stderr
    page = (run / "report" / "index.html").read_text()
    for plot in ("coder_reward.png", "proposer_reward.png", "pool.png", "frontier.png", "heldout.png"):
        assert f"src='{plot}'" in page
    assert "pool (valid / all)" in report.stdout
    assert "- Coder training, 2 steps: " in completed.stdout  # the verdicts behind the numbers, in words
    again = subprocess.run(
        [sys.executable, "-m", "kz_core.cli", "train", "--json", "--preset", "smoke", f"run.root={tmp_path}", "run.name=smoke"],
        capture_output=True, text=True, env=subprocess_env(), cwd=tmp_path,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    parsed = json.loads(again.stdout)  # a finished run resumed: nothing to do, the JSON summary only
    assert parsed["rounds"][0]["round"] == 1 and parsed["summary"]["rounds"] == "1" and parsed["what_happened"]


@pytest.mark.slow
def test_kz_train_killed_mid_round_resumes_without_redoing_finished_work(tmp_path):
    command = [sys.executable, "-m", "kz_core.cli", "train", "--preset", "smoke", f"run.root={tmp_path}", "run.name=smoke"]
    run = tmp_path / "smoke"
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=subprocess_env(), cwd=tmp_path, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if "frontier" in json.loads((run / STATE_FILE).read_text())["rounds"].get("1", {}):
                    break
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.02)
        assert process.poll() is None, "the run ended before it could be killed mid-round"
        os.killpg(process.pid, signal.SIGKILL)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    state = json.loads((run / STATE_FILE).read_text())
    # The smoke preset skips expert iteration (expert_samples 0), a phase that finishes as
    # soon as it starts: the kill may come before or after it is recorded.
    assert finished_phases(state, 1) in (["proposer", "pool", "frontier"], ["proposer", "pool", "frontier", "expert"])
    assert not (run / "rounds.jsonl").exists()
    with Journal(run / "journal.sqlite") as journal:
        frontier_rows = len(journal)
    assert frontier_rows == 4  # two samples for each of the two seed modules
    with open_pool(run) as pool:
        before = [(e.name, e.samples) for e in pool.entries()]

    resumed = kz_train(tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    for phase in ("proposer", "pool", "frontier"):
        assert f"round 1: {phase} already done, skipped" in resumed.stderr
    with open_pool(run) as pool:
        assert [(e.name, e.samples) for e in pool.entries()] == before  # nothing proposed or sampled twice
    with Journal(run / "journal.sqlite") as journal:
        assert len(journal) == frontier_rows + 4  # the held-out samples, nothing else
    assert len(read_rounds(run)) == 1

    # Killed after the held-out results were journaled but before the phase was recorded:
    # the re-run reuses the kept completions and every evaluation.
    state = json.loads((run / STATE_FILE).read_text())
    del state["rounds"]["1"]["heldout"]
    (run / STATE_FILE).write_text(json.dumps(state))
    again = kz_train(tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "round 1 held-out: evaluating 4 samples (4 reused from the journal)" in again.stderr
    assert "round 1: coder already done, skipped" in again.stderr
    with Journal(run / "journal.sqlite") as journal:
        assert len(journal) == frontier_rows + 4
    assert len(read_rounds(run)) == 1


def test_an_adapter_stays_with_its_role_until_that_role_is_trained(tmp_path):
    """policy.adapter is merged into the starting model; once a role is trained, its
    checkpoint holds those weights and the adapter is not applied a second time."""
    from kz_core.coevolve import Coevolution

    config = scripted_config(tmp_path, "policy.adapter=adapters/a")
    coevolution = Coevolution(config, tmp_path / "run", pm=object())
    policy = coevolution.phase_config().policy
    assert (policy.adapter, policy.proposer_adapter) == ("adapters/a", "adapters/a")
    coevolution._set_model("proposer", "trained/proposer")
    policy = coevolution.phase_config().policy
    assert (policy.model, policy.adapter) == ("base", "adapters/a")
    assert (policy.proposer_model, policy.proposer_adapter) == ("trained/proposer", "")
    own = scripted_config(tmp_path, "policy.adapter=adapters/a", "policy.proposer_model=org/p", "policy.proposer_adapter=adapters/p")
    assert Coevolution(own, tmp_path / "other", pm=object()).phase_config().policy.proposer_adapter == "adapters/p"
