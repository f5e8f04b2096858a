"""Coder GRPO in several processes (``accelerate launch``): two CPU processes train the smoke
preset together, and the pieces that make it right: which process writes what, each
process's evaluation devices, the merged step records, the batch rules."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from kz_core.config import load_config
from kz_core.model import EvalResult, Verdict
from kz_core.rewards import CoderReward

from kz_policy_hf.distributed import TrainingProcesses, evaluation_for_process
from kz_policy_hf.errors import PolicyError


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _launch(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    """``accelerate launch`` with two processes on the CPU: accelerate's multi-GPU launcher
    (torchrun) with no GPU visible, so each process trains on the CPU over gloo
    (``accelerate launch --cpu`` starts one process unless it goes through mpirun)."""
    command = [
        sys.executable, "-m", "accelerate.commands.accelerate_cli", "launch",
        "--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
        "--dynamo_backend", "no", "--main_process_port", str(_free_port()),
        "-m", "kz_core.cli", "train", "coder", "--preset", "smoke", f"run.root={tmp_path}", "run.name=two", *overrides,
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)


@pytest.mark.slow
def test_two_processes_train_the_smoke_preset_together_then_resume(tmp_path, monkeypatch, embedded_model_dir):
    pytest.importorskip("accelerate")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from kz_core import Journal

    from kz_policy_hf.tiny import tiny_model_path

    # A cache of this test's own (the session's holds the embedded model alone), with the
    # embedded model's tokenizer that the tiny model takes; the tiny model is built once
    # here, not by both processes at the same moment.
    cache = tmp_path / "cache"
    (cache / "models").mkdir(parents=True)
    (cache / "models" / embedded_model_dir.name).symlink_to(embedded_model_dir, target_is_directory=True)
    monkeypatch.setenv("KZ_CACHE_DIR", str(cache))
    tiny_model_path()
    completed = _launch(tmp_path)
    assert completed.returncode == 0, completed.stderr[-4000:]
    run_dir = tmp_path / "two"

    # Both processes trained steps 1 and 2: each saved its random state at each checkpoint.
    for step in (1, 2):
        checkpoint = run_dir / "checkpoints" / f"checkpoint-{step}"
        assert sorted(p.name for p in checkpoint.glob("rng_state*")) == ["rng_state_0.pth", "rng_state_1.pth"]
        assert json.loads((checkpoint / "trainer_state.json").read_text())["global_step"] == step

    # One line per step, each over both processes' completions: 2 processes x 2 per device.
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    for m in metrics:
        assert sum(m["verdicts"].values()) == 4 and m["groups"] == 2
        assert m["reward"] is not None and m["correct_rate"] is not None and 0 <= m["reward_wait_share"] <= 1

    # Process 0 speaks and writes the run's files; process 1 logs to its own file.
    assert completed.stderr.count("step 2 loss") == 1 and completed.stderr.count("trained 2 steps") == 1
    assert "2 processes" in completed.stderr
    assert "process 1" in (run_dir / "kz.rank1.log").read_text()
    assert "seed:" in (run_dir / "config.yaml").read_text()

    # final/ is a model every later command loads.
    AutoModelForCausalLM.from_pretrained(run_dir / "final")
    AutoTokenizer.from_pretrained(run_dir / "final")

    # Every judged completion is in the one journal, once, signed.
    def journal_rows() -> int:
        with sqlite3.connect(run_dir / "journal.sqlite") as db:
            return db.execute("SELECT COUNT(*) FROM results").fetchone()[0]

    with Journal(run_dir / "journal.sqlite") as journal:
        assert len(journal.results()) == journal_rows() == sum(sum(m["verdicts"].values()) for m in metrics) == 8

    # A third step: both processes resume from checkpoint-2, and the run gains one line.
    again = _launch(tmp_path, "train.max_steps=3")
    assert again.returncode == 0, again.stderr[-4000:]
    assert "resuming from" in again.stderr and "checkpoint-2" in again.stderr
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2, 3]
    assert sorted(p.name for p in (run_dir / "checkpoints" / "checkpoint-3").glob("rng_state*")) == ["rng_state_0.pth", "rng_state_1.pth"]
    assert journal_rows() == 12


def _result(problem: str, verdict: Verdict, speedups: dict[str, float] | None = None) -> EvalResult:
    return EvalResult(problem, "0", "triton", verdict, speedups=speedups or {})


def test_merged_records_of_two_processes_are_the_record_of_the_whole_batch():
    """Each process rewards whole groups; the merged record of a step must say what one
    process rewarding the whole batch would have recorded."""
    config = load_config(None, ["reward.tau=0.5"])
    batch = {
        "a": [_result("a", Verdict.CORRECT), _result("a", Verdict.CORRECT)],
        "b": [_result("b", Verdict.INCORRECT), _result("b", Verdict.FORMAT_ERROR)],
        "c": [_result("c", Verdict.CORRECT, {"eager": 1.5}), _result("c", Verdict.TIMEOUT)],
        "d": [_result("d", Verdict.CORRECT, {"eager": 0.5}), _result("d", Verdict.INCORRECT, {"eager": 9.0})],
    }
    rewards = {"a": [1.0, 1.0], "b": [0.0, -1.0], "c": [2.5, 0.0], "d": [0.5, 0.0]}

    def record(names: list[str], waited: float) -> dict:
        reward = CoderReward([], config)
        problems = [name for name in names for _ in batch[name]]
        reward._record(problems, [r for name in names for r in batch[name]], [x for name in names for x in rewards[name]], waited, {})
        return reward.step_log[-1]

    whole = record(["a", "b", "c", "d"], 3.0)
    merged = CoderReward.merge_step_records([record(["a"], 1.0), record(["b", "c"], 3.0), record(["d"], 2.0)])
    for key in ("reward_mean", "correct_rate", "speedup_geomean", "fast_1"):
        assert merged[key] == pytest.approx(whole[key]), key
    for key in ("gate_open_groups", "groups", "signal_groups", "verdicts", "speed_measured", "reward_wait_s", "speedup_count"):
        assert merged[key] == whole[key], key
    assert merged["gate_open_groups"] == 3 and merged["verdicts"]["correct"] == 4
    # Groups whose rewards differ (b, c, d; a's are equal): GRPO learns from those alone.
    assert whole["signal_groups"] == 3
    # The speed of the correct results only (the incorrect 9x counts for nothing): 1.5 and 0.5.
    assert whole["speedup_geomean"] == pytest.approx((1.5 * 0.5) ** 0.5) and whole["speedup_count"] == 2
    assert whole["fast_1"] == pytest.approx(1 / 8)
    assert record(["a", "b"], 1.0)["speedup_geomean"] is None and record(["a", "b"], 1.0)["fast_1"] is None
    # A process that has judged nothing yet weighs nothing; nothing judged anywhere: no rates.
    assert CoderReward.merge_step_records([whole, {}])["correct_rate"] == pytest.approx(whole["correct_rate"])
    assert CoderReward.merge_step_records([{}, {}])["correct_rate"] is None


def test_each_process_evaluates_on_its_own_gpu_or_its_share_of_eval_devices():
    config = load_config(None, ["eval.device=cuda"])
    alone = TrainingProcesses(rank=0, count=1, device="cuda:0")
    assert evaluation_for_process(config, alone) is config  # one process: as configured
    second = TrainingProcesses(rank=1, count=2, device="cuda:1")
    assert evaluation_for_process(config, second).eval.device == "cuda:1"
    assert evaluation_for_process(load_config(None, ["eval.device=auto"]), second).eval.device == "cuda:1"
    # A device the user named stays; a CPU process keeps auto (it resolves where it runs).
    assert evaluation_for_process(load_config(None, ["eval.device=cuda:3"]), second).eval.device == "cuda:3"
    on_cpu = TrainingProcesses(rank=1, count=2, device="cpu")
    assert evaluation_for_process(load_config(None, ["eval.device=auto"]), on_cpu).eval.device == "auto"
    # eval.devices is dealt out: process r takes every N-th device from the r-th.
    listed = load_config(None, ["eval.devices=[cuda:4,cuda:5,cuda:6,cuda:7]"])
    shares = [list(evaluation_for_process(listed, TrainingProcesses(rank, 2, f"cuda:{rank}")).eval.devices) for rank in (0, 1)]
    assert shares == [["cuda:4", "cuda:6"], ["cuda:5", "cuda:7"]]
    # Fewer devices than processes: shared, with a warning that timings disturb each other.
    warnings: list[str] = []
    from loguru import logger

    sink = logger.add(lambda message: warnings.append(str(message)), level="WARNING")
    try:
        few = load_config(None, ["eval.devices=[cuda:4]"])
        assert list(evaluation_for_process(few, TrainingProcesses(2, 3, "cuda:2")).eval.devices) == ["cuda:4"]
    finally:
        logger.remove(sink)
    assert any("shares cuda:4" in w for w in warnings)
    with pytest.raises(PolicyError, match="eval.engine=ray with several training processes"):
        evaluation_for_process(load_config(None, ["eval.engine=ray"]), second)


def test_fewer_problems_than_a_generation_batch_are_repeated_to_fill_it(tmp_path):
    """TRL drops an incomplete batch of prompts, so it would train no step at all: the rows
    are repeated in turn until they fill one batch (a frontier of one module still trains)."""
    from datasets import Dataset

    from kz_policy_hf.training import fill_generation_batch, grpo_config

    args = grpo_config(load_config("smoke", ["train.per_device_train_batch_size=6", "train.num_generations=2"]), tmp_path, on_gpu=False)
    one = Dataset.from_list([{"prompt": "a"}])
    assert fill_generation_batch(args, one, "problems")["prompt"] == ["a", "a", "a"]
    two = Dataset.from_list([{"prompt": "a"}, {"prompt": "b"}])
    assert fill_generation_batch(args, two, "problems")["prompt"] == ["a", "b", "a"]
    enough = Dataset.from_list([{"prompt": str(i)} for i in range(5)])
    assert len(fill_generation_batch(args, enough, "problems")) == 5


def test_batch_settings_trl_refuses_are_a_policy_error(tmp_path):
    from kz_policy_hf.training import grpo_config

    with pytest.raises(PolicyError, match="must be a multiple of train.num_generations"):
        grpo_config(load_config("smoke", ["train.per_device_train_batch_size=3"]), tmp_path, on_gpu=False)
    # TRL's own rule, not a traceback: the generation batch against the processes' batches.
    with pytest.raises(PolicyError, match="generation_batch_size"):
        grpo_config(load_config("smoke", ["train.extra.generation_batch_size=3"]), tmp_path, on_gpu=False)


def test_the_proposer_refuses_several_processes(monkeypatch, tmp_path):
    import kz_policy_hf.distributed as distributed
    from kz_policy_hf.training import train_proposer

    monkeypatch.setattr(distributed, "training_processes", lambda config: TrainingProcesses(rank=0, count=2, device="cpu"))
    with pytest.raises(PolicyError, match="the Proposer trains in one process, not 2"):
        train_proposer(load_config("smoke"), tmp_path, api_sets=[("torch.relu",)])
    assert not (tmp_path / "pool.sqlite").exists()
