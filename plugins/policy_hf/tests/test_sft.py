"""Supervised fine-tuning (kz train sft) on chat pairs, with the tiny random model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kz_core.config import load_config

from kz_policy_hf.errors import PolicyError
from kz_policy_hf.sft import sft_rows, train_sft


def write_pairs(path: Path) -> Path:
    """Coder rows of two backends and two splits, and a Proposer row, as kz data synth writes them."""
    rows = []
    for index, (role, backend, split) in enumerate([("coder", "triton", "train"), ("coder", "cuda", "train"), ("coder", "triton", "heldout"), ("proposer", "", "train")] * 2):
        rows.append(
            {
                "role": role,
                "backend": backend,
                "split": split,
                "prompt": [{"role": "system", "content": "You write kernels."}, {"role": "user", "content": f"Problem {index}: y = relu(x)."}],
                "completion": [{"role": "assistant", "content": f"```python\n# answer {index}\nclass ModelNew: pass\n```"}],
            }
        )
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_rows_are_filtered_by_role_split_and_backend(tmp_path):
    pairs = write_pairs(tmp_path / "pairs.jsonl")
    assert len(sft_rows(pairs, "coder", "train")) == 4
    assert len(sft_rows(pairs, "coder", "train", ["triton"])) == 2
    assert len(sft_rows(pairs, "coder", "")) == 6
    assert len(sft_rows(pairs, "proposer", "train")) == 2
    assert len(sft_rows(pairs, "both", "train")) == 6
    assert sft_rows(pairs, "coder", "train").column_names == ["prompt", "completion"]
    with pytest.raises(PolicyError, match="kz data synth"):
        sft_rows(tmp_path / "missing.jsonl", "coder")
    with pytest.raises(PolicyError, match="no row"):
        sft_rows(pairs, "coder", "train", ["opencl"])
    with pytest.raises(PolicyError, match="sft.role"):
        sft_rows(pairs, "critic")
    (tmp_path / "bad.jsonl").write_text('{"text": "no chat"}\n')
    with pytest.raises(PolicyError, match="prompt"):
        sft_rows(tmp_path / "bad.jsonl", "coder")


def test_lora_steps_give_a_merged_model_and_the_adapter_and_resume(tmp_path):
    from transformers import AutoModelForCausalLM

    pairs = write_pairs(tmp_path / "pairs.jsonl")
    overrides = ["policy.model=embedded:tiny", f"sft.data={pairs}", "sft.max_steps=2", "sft.per_device_train_batch_size=2", "sft.save_steps=1", "sft.max_length=256"]
    summary = train_sft(load_config(None, overrides), tmp_path / "run")
    assert summary["steps"] == 2 and summary["rows"] == 4 and summary["first_loss"] is not None
    final = Path(summary["final_model"])
    AutoModelForCausalLM.from_pretrained(final)  # a complete model: GRPO starts from it
    assert (Path(summary["adapter"]) / "adapter_config.json").is_file()
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2]
    again = train_sft(load_config(None, [*overrides[:2], f"sft.data={pairs}", "sft.max_steps=3", "sft.per_device_train_batch_size=2", "sft.save_steps=1", "sft.max_length=256"]), tmp_path / "run")
    assert again["resumed_from"] and again["resumed_from"].endswith("checkpoint-2") and again["steps"] == 3


def test_kz_train_sft_says_what_to_do_without_data(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "kz_core.cli", "train", "sft", "--data", str(tmp_path / "none.jsonl"), f"run.root={tmp_path}", "policy.model=embedded:tiny"],
        capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"},
    )
    assert result.returncode == 2 and "kz data synth" in result.stderr


def test_train_policy_fine_tunes_the_coder_for_expert_iteration(tmp_path):
    from kz_core.model import TrainingSummary
    from kz_core.plugins import get_plugin_manager

    rows = [json.loads(line) for line in write_pairs(tmp_path / "pairs.jsonl").read_text().splitlines()][:2]
    # sft.role selects rows for kz train sft; expert iteration fine-tunes the Coder's model whatever it says.
    config = load_config(None, ["policy.model=embedded:tiny", "policy.proposer_model=no/such-model", "sft.role=proposer", "sft.max_steps=1", "sft.per_device_train_batch_size=2", "sft.max_length=256"])
    summary = get_plugin_manager().hook.train_policy(role="coder_sft", items=rows, config=config, run_dir=tmp_path / "expert")
    assert isinstance(summary, TrainingSummary) and summary.role == "coder" and summary.steps == 1
    assert Path(summary.model_path, "config.json").is_file()
