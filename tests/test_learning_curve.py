"""benchmarks/learning_curve.py: a point sampled from a model, judged into curve.jsonl, and
plotted by kz report (with the tiny random model: every reply is a format error, which is
what the curve must then say)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "learning_curve.py"


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-P", str(SCRIPT), *args], capture_output=True, text=True, cwd=cwd, timeout=900)


@pytest.mark.slow
def test_a_point_is_sampled_judged_and_plotted(tmp_path):
    problem = (REPO / "examples" / "problems" / "2_scaled_relu.py").read_text()
    problems = tmp_path / "heldout.jsonl"
    problems.write_text("".join(json.dumps({"name": f"p{i}", "code": problem, "problem_id": i}) + "\n" for i in (1, 2, 3)))
    synth = tmp_path / "synth.jsonl"
    synth.write_text(json.dumps({"role": "proposer", "split": "heldout", "apis": ["torch.relu", "torch.mul"]}) + "\n")
    options = ["policy.model=embedded:tiny", "policy.max_new_tokens=8", "policy.one_shot=false", "policy.device=cpu"]
    sampled = run("sample", "--label", "tiny", "--out", "curve", "--heldout", str(problems), "--limit", "2", "--synth", str(synth), "--n", "2", *options, cwd=tmp_path)
    assert sampled.returncode == 0, sampled.stderr[-2000:]
    point = json.loads((tmp_path / "curve" / "points" / "tiny" / "point.json").read_text())
    assert point["n"] == 2 and set(point["seconds"]) == {"heldout", "proposer"}
    judged = run("judge", "--out", "curve", "eval.workers=1", cwd=tmp_path)
    assert judged.returncode == 0, judged.stderr[-2000:]
    rows = {r["set"]: r for r in map(json.loads, (tmp_path / "curve" / "curve.jsonl").read_text().splitlines())}
    assert rows["heldout"]["samples"] == 4 and rows["heldout"]["problems"] == 2  # --limit 2 of 3
    assert rows["heldout"]["format_error_rate"] == 1.0 and rows["heldout"]["pass@1"] == 0.0
    assert rows["proposer"]["samples"] == 1 and rows["proposer"]["valid_rate"] == 0.0
    report = subprocess.run([sys.executable, "-m", "kz_core.cli", "report", str(tmp_path / "curve")], capture_output=True, text=True)
    assert report.returncode == 0 and (tmp_path / "curve" / "report" / "curve.png").is_file()


def test_kernelbench_sizes_shrink_for_a_cpu():
    sys.path.insert(0, str(REPO / "benchmarks"))
    from learning_curve import shrink_sizes

    code = "import torch\nbatch_size = 4096\ndim = 393216  # published\nsmall = 16\nflag = 1\n\ndef get_inputs():\n    return [torch.rand(batch_size, dim)]\n"
    shrunk = shrink_sizes(code, 256)
    assert "batch_size = 256\ndim = 256  # published\nsmall = 16\nflag = 1\n" in shrunk
    assert shrink_sizes(code, 1 << 20) == code


@pytest.mark.slow
def test_select_keeps_the_problems_solved_sometimes(tmp_path):
    """The tiny random model writes format errors only: every pass rate is 0, so nothing
    is kept by default, and everything with --low 0 --high 0."""
    problem = (REPO / "examples" / "problems" / "2_scaled_relu.py").read_text()
    problems = tmp_path / "train.jsonl"
    problems.write_text("".join(json.dumps({"name": f"p{i}", "code": problem, "problem_id": i}) + "\n" for i in (1, 2, 3)))
    options = ["policy.model=embedded:tiny", "policy.max_new_tokens=8", "policy.one_shot=false", "policy.device=cpu", "eval.workers=1"]
    chosen = run("select", "--problems", str(problems), "--ids", "1-2", "--n", "2", "--out", "ids.json", *options, cwd=tmp_path)
    assert chosen.returncode == 0, chosen.stderr[-2000:]
    report = json.loads((tmp_path / "ids.json").read_text())
    assert report["ids"] == [] and report["rates"] == {"p1": 0.0, "p2": 0.0} and report["n"] == 2
    everything = run("select", "--problems", str(problems), "--n", "1", "--low", "0", "--high", "0", "--out", "all.json", *options, cwd=tmp_path)
    assert everything.returncode == 0, everything.stderr[-2000:]
    assert json.loads((tmp_path / "all.json").read_text())["ids"] == [1, 2, 3]
