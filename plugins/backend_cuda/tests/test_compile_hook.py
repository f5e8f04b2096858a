"""backend_compile for ``cuda`` candidates, kz check and kz eval on a CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kz_core.backend import CompiledCandidate, CompileFailure
from kz_core.model import Candidate, Verdict
from kz_core.plugins import get_plugin_manager

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples" / "candidates" / "cuda"
GOOD = (EXAMPLES / "1_vector_add.py").read_text()
BROKEN = GOOD.replace("out[i] = a[i] + b[i];", "out[i] = a[i] + c[i];")


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KZ_CACHE_DIR", str(tmp_path / "cache"))


def compile_hook(code: str, tmp_path: Path):
    return get_plugin_manager().hook.backend_compile(candidate=Candidate("1_vector_add", "cuda", code), device="cpu", workdir=tmp_path)


def test_backend_compile_loads_the_candidate_and_reports_kernels(tmp_path):
    compiled = compile_hook(GOOD, tmp_path)
    assert isinstance(compiled, CompiledCandidate) and compiled.backend == "cuda"
    assert compiled.model_class.__name__ == "ModelNew"
    assert "add_kernel" in compiled.notes[0] and "NVRTC" in compiled.notes[0]


def test_backend_compile_maps_nvrtc_errors_to_the_candidates_line(tmp_path):
    failure = compile_hook(BROKEN, tmp_path)
    assert isinstance(failure, CompileFailure) and failure.verdict is Verdict.COMPILE_ERROR
    expected_line = next(i for i, line in enumerate(BROKEN.splitlines(), start=1) if "c[i]" in line)
    assert failure.line == expected_line
    assert 'identifier "c" is undefined' in failure.log
    assert f"candidate line {expected_line}" in failure.message


def test_backend_compile_answers_only_for_registered_backends(tmp_path):
    pm = get_plugin_manager()
    assert pm.hook.backend_compile(candidate=Candidate("p", "cutlass", GOOD), device="cpu", workdir=tmp_path) is None


def kz(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kz_core.cli", *args], capture_output=True, text=True, cwd=cwd, env={**os.environ, "COLUMNS": "200"})


@pytest.mark.slow
def test_kz_check_compiles_every_example_and_reports_a_broken_one(tmp_path):
    candidates = tmp_path / "c.jsonl"
    rows = [{"problem": p.stem, "code": p.read_text(), "backend": "cuda"} for p in sorted(EXAMPLES.glob("*.py"))]
    rows.append({"problem": "1_vector_add", "code": BROKEN, "backend": "cuda", "sample_id": "broken"})
    candidates.write_text("".join(json.dumps(r) + "\n" for r in rows))
    completed = kz("check", "--candidates", str(candidates), "--json", "eval.workers=2", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    results = [json.loads(line) for line in completed.stdout.splitlines()]
    assert [r["status"] for r in results[:-1]] == ["compiled"] * (len(rows) - 1)
    assert all("not run" in r["message"] for r in results[:-1])
    assert results[-1]["status"] == "compile_error"
    assert "kernel.cu(" in results[-1]["findings"][0]["message"]
    assert "compiled means compiled, not run" in completed.stderr
    table = kz("check", "--candidates", str(candidates), "eval.workers=2", cwd=tmp_path)
    assert "nothing was run" in table.stdout and 'identifier "c" is undefined' in table.stdout


def test_kz_eval_on_a_cpu_says_cuda_kernels_compiled_but_did_not_run(tmp_path):
    completed = kz("eval", "--candidates", str(EXAMPLES), "--backend", "cuda", "--device", "cpu", "--json", f"run.root={tmp_path}", "eval.workers=2", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    results = [json.loads(line) for line in (tmp_path / "eval-cuda" / "results.jsonl").read_text().splitlines()]
    assert {r["verdict"] for r in results} == {"runtime_error"}
    for result in results:
        assert "not run: backend 'cuda' needs a GPU" in result["message"]
        assert "NVRTC" in result["message"]
