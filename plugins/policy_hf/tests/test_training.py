"""Coder training: rewards from the real evaluator through CA-GRPO, and GRPO steps with TRL."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from kz_core.config import load_config
from kz_core.problems import load_problems

from kz_core.rewards import CoderReward, completion_text

REPO = Path(__file__).resolve().parents[3]
PROBLEMS = load_problems("examples")
GOOD = (REPO / "examples" / "candidates" / "triton" / "2_scaled_relu.py").read_text()
WRONG = GOOD.replace("* scale", "* (scale + 1.0)")


def test_rewards_come_from_the_evaluator_and_ca_grpo():
    config = load_config(None, ["eval.device=cpu", "eval.workers=1", "eval.timing=false"])
    reward = CoderReward([PROBLEMS.get("2_scaled_relu")], config)
    completions = [
        [{"role": "assistant", "content": f"```python\n{GOOD}```"}],
        [{"role": "assistant", "content": "No code, sorry."}],
        [{"role": "assistant", "content": f"```python\n{WRONG}```"}],
    ]
    import asyncio

    try:
        rewards = asyncio.run(reward(prompts=[None] * 3, completions=completions, problem=["2_scaled_relu"] * 3))
    finally:
        reward.close()
    assert WRONG != GOOD
    # Below the gate (1 of 3 correct < tau 0.5): correct 1, incorrect 0, format error -1.
    assert rewards == [1.0, -1.0, 0.0]
    entry = reward.step_log[-1]
    assert entry["verdicts"] == {"correct": 1, "format_error": 1, "incorrect": 1}
    assert entry["correct_rate"] == pytest.approx(1 / 3) and entry["gate_open_groups"] == 0 and entry["groups"] == 1
    assert entry["signal_groups"] == 1  # rewards 1, -1, 0 differ: the group has a signal
    assert entry["speed_measured"] is False and entry["reward_wait_s"] > 0


def test_the_reward_function_is_picklable():
    reward = CoderReward([PROBLEMS.get("2_scaled_relu")], load_config())
    clone = pickle.loads(pickle.dumps(reward))
    assert clone.problems.keys() == reward.problems.keys() and clone._evaluator is None


def test_completion_text_reads_both_shapes():
    assert completion_text([{"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}]) == "ab"
    assert completion_text("plain") == "plain"


@pytest.mark.slow
def test_two_grpo_steps_of_the_smoke_preset_then_resume(tmp_path, embedded_model_dir):
    # embedded_model_dir: the tiny model's tokenizer is the embedded model's, converted once
    # for the test run (conftest.py) rather than by this kz process.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    command = [sys.executable, "-m", "kz_core.cli", "train", "coder", "--preset", "smoke", f"run.root={tmp_path}", "run.name=smoke"]
    completed = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-3000:]
    run_dir = tmp_path / "smoke"
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    for m in metrics:
        assert m["reward"] is not None and m["correct_rate"] is not None and 0 <= m["reward_wait_share"] <= 1
        assert sum(m["verdicts"].values()) == 2  # num_generations completions judged per step
    assert (run_dir / "checkpoints" / "checkpoint-2").is_dir() and (run_dir / "final").is_dir()
    # One line per step from kz, not transformers' raw log dicts ({'loss': ...}).
    assert "{'loss'" not in completed.stdout + completed.stderr and "step 2 loss" in completed.stderr
    again = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming from" in again.stderr and "checkpoint-2" in again.stderr


def test_lora_grpo_gives_a_merged_model_and_the_adapter(tmp_path, embedded_model_dir):
    """With train.lora, final/ is a whole model that every later command loads (the
    adapters merged in) and adapter/ holds the adapters alone (what a GPU run sends back)."""
    from transformers import AutoModelForCausalLM

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    command = [sys.executable, "-m", "kz_core.cli", "train", "coder", "--preset", "smoke", f"run.root={tmp_path}", "run.name=lora", "train.lora=true", "train.max_steps=1", "train.lora_r=4"]
    completed = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-3000:]
    run_dir = tmp_path / "lora"
    AutoModelForCausalLM.from_pretrained(run_dir / "final")
    assert not (run_dir / "final" / "adapter_config.json").exists()
    adapter = json.loads((run_dir / "adapter" / "adapter_config.json").read_text())
    assert adapter["r"] == 4  # every linear layer, not only peft's default attention pair
    assert any(name.endswith("down_proj") for name in adapter["target_modules"]) and any(name.endswith("q_proj") for name in adapter["target_modules"])


def test_train_policy_answers_for_its_samplers_only_and_checks_the_role(tmp_path):
    from kz_policy_hf.errors import PolicyError
    from kz_policy_hf.plugin import train_policy

    other = load_config("smoke", ["policy.sampler=someone-else"])
    assert train_policy(role="coder", items=[], config=other, run_dir=tmp_path / "a") is None
    assert not (tmp_path / "a").exists()  # nothing written for a sampler that is not ours
    with pytest.raises(PolicyError, match="unknown policy role 'critic'"):
        train_policy(role="critic", items=[], config=load_config("smoke"), run_dir=tmp_path / "b")


def test_a_resumed_run_drops_the_metrics_of_steps_it_trains_again(tmp_path):
    from kz_policy_hf.training import drop_metrics_after

    path = tmp_path / "metrics.jsonl"
    assert drop_metrics_after(path, 3) == 0  # no file yet
    path.write_text("".join(json.dumps({"step": s, "reward": 0.0}) + "\n" for s in (1, 2, 3, 4, 5)) + '{"step": 6, "rew')
    assert drop_metrics_after(path, 3) == 3  # steps 4 and 5, and the line a crash cut off
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [1, 2, 3]
    assert drop_metrics_after(path, 3) == 0


def test_resuming_skips_a_checkpoint_whose_writing_was_cut(tmp_path):
    """A run stopped by a time limit while it saved leaves a checkpoint folder without its
    trainer state; resuming from it would fail, so the newest complete one is taken."""
    from kz_policy_hf.training import last_checkpoint

    assert last_checkpoint(tmp_path) is None
    for step, complete in ((2, True), (10, True), (12, False)):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        (folder / "adapter_model.safetensors").write_bytes(b"weights")
        if complete:
            (folder / "trainer_state.json").write_text("{}")
    (tmp_path / "checkpoint-latest").mkdir()  # not a step number: never a resume point
    assert last_checkpoint(tmp_path) == str(tmp_path / "checkpoint-10")  # by number: 10 after 2, 12 cut
