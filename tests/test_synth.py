"""Synthetic training pairs (kz data synth): templates that always give valid sources, and
a generator that keeps only what the evaluator and module validation accept."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kz_core.config import load_config
from kz_core.evaluate.guards import check_source
from kz_core.model import Severity
from kz_core.prompts import coder_prompt, proposer_prompt
from kz_core.synth.generate import draw, synthesize_dataset
from kz_core.synth.templates import FAMILIES, synthesize


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_gives_valid_deterministic_sources(family):
    from kz_backend_triton.checks import check_triton_source

    seen = set()
    for seed in range(25):
        synthetic = synthesize(family, seed)
        assert synthetic == synthesize(family, seed), "the same seed must give the same sources"
        for code in (synthetic.problem, synthetic.triton, synthetic.cuda):
            ast.parse(code)
        assert "class Model(nn.Module)" in synthetic.problem and "def get_inputs()" in synthetic.problem
        assert not [f for f in check_source(synthetic.triton, "p") if f.severity is Severity.ERROR]
        assert not [f for f in check_triton_source(synthetic.triton) if f.severity is Severity.ERROR]
        assert 'extern "C" __global__' in synthetic.cuda and "load_cuda" in synthetic.cuda
        assert synthetic.template.startswith(family) and all(synthetic.apis)
        seen.add(synthetic.problem)
    assert len(seen) >= 20, "seeds should give different problems"


def test_draw_deduplicates_by_structure_and_decontaminates():
    from kz_core.proposer.similarity import fingerprint

    kept, duplicates, _ = draw(30, 0, ["elementwise"], 1, [], 0.9)
    digests = [fingerprint(s.problem).digest for _, s in kept]
    assert len(digests) == len(set(digests)) and duplicates > 0
    target = kept[0][1].problem
    again, _, contaminated = draw(30, 0, ["elementwise"], 1, [("known", fingerprint(target))], 0.9)
    assert contaminated >= 1 and target not in {s.problem for _, s in again}


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    config = load_config(None, ["eval.device=cpu", "eval.workers=2", "eval.cache=false", "eval.timing=false"])
    out = tmp_path_factory.mktemp("synth") / "pairs.jsonl"
    report = synthesize_dataset(config, count=10, out=out, seed=7)
    return config, report, [json.loads(line) for line in out.read_text().splitlines()], out


@pytest.mark.triton
@pytest.mark.slow
def test_kept_pairs_are_verified_with_provenance_and_the_grpo_prompts(synthesized):
    config, report, rows, _ = synthesized
    assert report.problems == 10 and report.rows == len(rows) > 0
    coder = [r for r in rows if r["role"] == "coder"]
    proposer = [r for r in rows if r["role"] == "proposer"]
    assert {r["backend"] for r in coder} == {"triton", "cuda"}
    assert all(r["verdict"] == "correct" for r in coder if r["backend"] == "triton")
    assert all(r["verdict"] == "compiled" for r in coder if r["backend"] == "cuda")  # no GPU here to run them
    assert proposer and all(r["verdict"] == "valid" for r in proposer)
    for row in rows:
        assert {"family", "template", "seed", "apis", "split", "problem_code"} <= set(row)
        assert row["completion"][0]["role"] == "assistant" and row["completion"][0]["content"].startswith("```python\n")
    from kz_core.model import Problem

    row = coder[0]
    expected = coder_prompt(Problem(row["problem"], row["problem_code"]), row["backend"], config.policy)
    assert row["prompt"] == expected.chat()
    expected = proposer_prompt(proposer[0]["apis"], config.policy)
    assert proposer[0]["prompt"] == expected.chat()


def test_the_heldout_split_is_disjoint_by_family_and_datasets_loads_it(synthesized):
    import datasets

    _, _, rows, out = synthesized
    train = {r["family"] for r in rows if r["split"] == "train"}
    heldout = {r["family"] for r in rows if r["split"] == "heldout"}
    assert heldout == {"softmax"} and not train & heldout
    loaded = datasets.load_dataset("json", data_files=str(out), split="train")
    assert len(loaded) == len(rows) and loaded[0]["prompt"][0]["role"] == "system"


def test_each_split_has_a_problem_file_that_problem_sources_read(synthesized):
    from kz_core.problems import load_problems

    _, report, rows, _ = synthesized
    assert set(report.problem_files) == {"train", "heldout"}
    for split, path in report.problem_files.items():
        loaded = load_problems(path)
        assert not loaded.errors
        assert {p.name for p in loaded.problems} == {r["problem"] for r in rows if r["split"] == split}
        assert [p.problem_id for p in loaded.problems] == list(range(1, len(loaded.problems) + 1))
        assert len(load_problems(path, ids="1-2").problems) == min(2, len(loaded.problems))


@pytest.mark.triton
def test_kz_data_synth_command(tmp_path):
    env = {**os.environ, "COLUMNS": "200"}
    ok = subprocess.run([sys.executable, "-m", "kz_core.cli", "data", "synth", "--n", "3", "--backends", "triton", "--no-proposer", "--json", f"run.root={tmp_path}", "eval.workers=1", "eval.device=cpu"], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert ok.returncode == 0, ok.stderr
    summary = json.loads(ok.stdout)
    assert summary["coder_rows"] == 3 and Path(summary["out"]).is_file()
    bad = subprocess.run([sys.executable, "-m", "kz_core.cli", "data", "synth", "--backends", "opencl", f"run.root={tmp_path}"], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert bad.returncode == 2 and "opencl" in bad.stderr
