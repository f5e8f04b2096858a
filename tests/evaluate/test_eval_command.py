"""kz eval end to end: results JSONL, summary, journal reuse, bad input lines."""

from __future__ import annotations

import pytest

import json
import os
import subprocess
import sys
from pathlib import Path

from .conftest import CHEATS, EXAMPLE_CANDIDATES


def kz(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kz_core.cli", *args], capture_output=True, text=True, cwd=cwd, env={**os.environ, "COLUMNS": "200"})


@pytest.mark.triton
@pytest.mark.slow
def test_eval_writes_results_and_a_summary_then_reuses_the_journal(tmp_path):
    lines = [json.dumps({"problem": p.stem, "code": p.read_text()}) for p in sorted((EXAMPLE_CANDIDATES / "triton").glob("*.py"))[:3]]
    cheat = CHEATS / "triton" / "dead_kernel.py"
    lines.append(json.dumps({"problem": "1_vector_add", "code": cheat.read_text(), "sample_id": "cheat", "backend": "triton"}))
    lines.append("{broken json")
    lines.append(json.dumps({"problem": "no_such_problem", "code": "x = 1"}))
    candidates = tmp_path / "candidates.jsonl"
    candidates.write_text("\n".join(lines) + "\n")
    out = tmp_path / "results.jsonl"
    args = ("eval", "--candidates", str(candidates), "--out", str(out), "--device", "cpu", "--workers", "2", "--json", f"run.root={tmp_path / 'runs'}")
    first = kz(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "candidates.jsonl:5: not valid JSON" in first.stderr
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["verdict"] for r in results] == ["correct", "correct", "correct", "rejected", "format_error"]
    assert results[3]["sample_id"] == "cheat"
    assert "no_kernel_launch" in [f["check"] for f in results[3]["findings"]]
    for field in ("problem", "sample_id", "backend", "verdict", "findings", "timings", "max_abs_error", "runtime", "speedups"):
        assert field in results[0]
    assert results[0]["runtime"]["clock"] == "cpu" and results[0]["speedups"] == {}
    summary = json.loads(first.stdout)
    assert summary["verdicts"]["correct"] == 3 and summary["total"] == 5
    assert summary["fast_1_eager"] is None  # CPU: not measured, not zero
    journal = tmp_path / "runs" / "eval-candidates" / "journal.sqlite"
    assert journal.exists() and (journal.parent / "kz.log").exists() and (journal.parent / "config.yaml").exists()
    # The second run reads every result from the journal: no worker starts.
    second = kz(*args, "-v", cwd=tmp_path)
    assert second.returncode == 0
    assert "started candidate worker" not in second.stderr
    assert [json.loads(line)["verdict"] for line in out.read_text().splitlines()] == [r["verdict"] for r in results]
    third = kz(*args, "--no-cache", "-v", cwd=tmp_path)
    assert "started candidate worker" in third.stderr


@pytest.mark.triton
@pytest.mark.slow
def test_eval_table_and_a_folder_of_candidates(tmp_path):
    # Two of the examples (all six are judged in tests/evaluate/test_cheats.py): a folder of
    # <problem>.py files, each its problem's candidate.
    folder = tmp_path / "candidates"
    folder.mkdir()
    for name in ("1_vector_add.py", "4_row_sum.py"):
        (folder / name).write_text((EXAMPLE_CANDIDATES / "triton" / name).read_text())
    completed = kz("eval", "--candidates", str(folder), "--device", "cpu", f"run.root={tmp_path}", "eval.workers=2", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert "pass rate" in completed.stdout and "100.0%" in completed.stdout
    results = [json.loads(line) for line in (tmp_path / "eval-candidates" / "results.jsonl").read_text().splitlines()]
    assert sorted(r["problem"] for r in results) == ["1_vector_add", "4_row_sum"]
    assert "not measured" in completed.stdout  # no speedups on a CPU


def test_eval_errors_are_one_line(tmp_path):
    missing = kz("eval", "--candidates", str(tmp_path / "absent.jsonl"), cwd=tmp_path)
    assert missing.returncode == 2 and "do not exist" in missing.stderr and "Traceback" not in missing.stderr
    (tmp_path / "c.jsonl").write_text(json.dumps({"problem": "1_vector_add", "code": "x"}) + "\n")
    no_gpu = kz("eval", "--candidates", str(tmp_path / "c.jsonl"), "--device", "cuda:7", cwd=tmp_path)
    assert no_gpu.returncode == 2 and "Traceback" not in no_gpu.stderr


def test_an_unknown_backend_is_a_usage_error_before_anything_runs(tmp_path):
    completed = kz("eval", "--candidates", str(EXAMPLE_CANDIDATES / "triton"), "--backend", "tritonn", f"run.root={tmp_path / 'runs'}", cwd=tmp_path)
    assert completed.returncode == 2 and "unknown backend 'tritonn'" in completed.stderr and "triton" in completed.stderr
    assert not (tmp_path / "runs").exists()  # no run folder, no results overwritten


@pytest.mark.triton
def test_one_py_file_is_one_candidate_and_an_empty_file_is_a_usage_error(tmp_path):
    single = tmp_path / "2_scaled_relu.py"
    single.write_text((EXAMPLE_CANDIDATES / "triton" / "2_scaled_relu.py").read_text())
    completed = kz("eval", "--candidates", str(single), "--device", "cpu", "--json", f"run.root={tmp_path}", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["verdicts"]["correct"] == 1
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    for path, why in ((empty, "the file is empty"), (EXAMPLE_CANDIDATES / ".." / ".." / "README.md", "malformed line")):
        failed = kz("eval", "--candidates", str(path), cwd=tmp_path)
        assert failed.returncode == 2 and "no candidates in" in failed.stderr and why in failed.stderr, failed.stderr


@pytest.mark.triton
@pytest.mark.slow
def test_each_verdict_on_the_console_fail_under_and_reuse(tmp_path):
    lines = [
        json.dumps({"problem": "1_vector_add", "code": (EXAMPLE_CANDIDATES / "triton" / "1_vector_add.py").read_text(), "sample_id": "good"}),
        json.dumps({"problem": "1_vector_add", "code": (CHEATS / "triton" / "dead_kernel.py").read_text(), "sample_id": "cheat"}),
    ]
    candidates = tmp_path / "two.jsonl"
    candidates.write_text("\n".join(lines) + "\n")
    args = ("eval", "--candidates", str(candidates), "--device", "cpu", f"run.root={tmp_path}")
    first = kz(*args, "--fail-under", "50", cwd=tmp_path)
    assert first.returncode == 0, first.stderr  # 50 % is not below 50 %
    assert "correct 1_vector_add/good" in first.stderr and "rejected 1_vector_add/cheat: rejected: no_kernel_launch" in first.stderr
    assert "not correct: 1 of 2" in first.stdout and "no_kernel_launch" in first.stdout
    second = kz(*args, "--fail-under", "75", cwd=tmp_path)
    assert second.returncode == 1 and "below --fail-under 75%" in second.stderr
    assert "2 of 2 results came from the run's journal" in second.stderr
    quiet = kz(*args, "-q", cwd=tmp_path)
    assert "1_vector_add/good" not in quiet.stderr and "not correct" not in quiet.stdout and "pass rate" in quiet.stdout
