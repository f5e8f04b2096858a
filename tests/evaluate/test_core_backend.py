"""The core's evaluator without kz-backend-triton: a small fake backend, installed as its
own distribution and loaded through its entry point (workers included), with Triton's
plugin left out. Its "kernels" are Python functions over NumPy views of the tensors, launched as
``kernel[grid](...)``; the plugin counts the launches, as a real backend's launcher does.

It implements no ``backend_kernels``, so candidates run in their own sandboxed process and
results say ``unverified_execution``: what this shows is the core's pipeline (sandbox,
verdicts, guards, journal, exit statuses), not a trust boundary for a new backend.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


PYPROJECT = """
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "kz-backend-pyloop"
version = "0.1.0"
dependencies = []

[project.entry-points.kz]
backend_pyloop = "kz_backend_pyloop"
"""

MODULE = '''
"""pyloop: kernels are Python functions, one call per program, launched as kernel[grid](...)."""
import types

from kz_core import BackendInfo, CompileFailure, CompiledCandidate, RunOutput, Verdict, hookimpl

LAUNCHES = {"count": 0}


class kernel:
    """``@kernel def body(pid, *args)``; ``body[grid](*args)`` runs it for pid in range(grid).
    Tensors reach the body as NumPy views of their memory (a CPU tensor's "device pointer"),
    so its work is the kernel's, not torch's."""

    def __init__(self, body):
        self.body = body

    def __getitem__(self, grid):
        def launch(*args):
            import torch

            LAUNCHES["count"] += 1
            views = [x.detach().numpy() if isinstance(x, torch.Tensor) else x for x in args]
            for pid in range(grid[0] if isinstance(grid, tuple) else grid):
                self.body(pid, *views)
        return launch


@hookimpl
def register_backends(register):
    register(BackendInfo(name="pyloop", language="python", description="Python functions as kernels (the core's tests)", runs_on_cpu=True))


@hookimpl
def backend_compile(candidate, workdir):
    module = types.ModuleType("candidate")
    module.__file__ = str(workdir / "candidate.py")
    try:
        exec(compile(candidate.code, module.__file__, "exec"), module.__dict__)
    except SyntaxError as exc:
        return CompileFailure(message=f"syntax error: {exc.msg}", line=exc.lineno, verdict=Verdict.FORMAT_ERROR)
    if not isinstance(getattr(module, "ModelNew", None), type):
        return CompileFailure(message="no class ModelNew", verdict=Verdict.FORMAT_ERROR)
    return CompiledCandidate(backend="pyloop", model_class=module.ModelNew, namespace=module.__dict__)


@hookimpl
def backend_run(compiled, model, inputs):
    before = LAUNCHES["count"]
    outputs = model(*inputs)
    return RunOutput(outputs=outputs, launches=LAUNCHES["count"] - before)
'''

ADD = '''
import torch
import torch.nn as nn
from kz_backend_pyloop import kernel

BLOCK = 4096


@kernel
def add(pid, a, b, out, n):
    start = pid * BLOCK
    stop = min(start + BLOCK, n)
    out[start:stop] = a[start:stop] {op} b[start:stop]


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous().view(-1), b.contiguous().view(-1)
        out = torch.empty_like(a)
        n = a.numel()
        add[((n + BLOCK - 1) // BLOCK,)](a, b, out, n)
        return out
'''

NO_KERNEL = '''
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a + b
'''


@pytest.fixture(scope="module")
def site(install_plugin):
    return install_plugin(PYPROJECT, {"kz_backend_pyloop.py": MODULE})


def test_the_evaluator_judges_a_fake_backends_candidates_without_triton(site, tmp_path):
    rows = [
        {"problem": "1_vector_add", "backend": "pyloop", "sample_id": "good", "code": ADD.replace("{op}", "+")},
        {"problem": "1_vector_add", "backend": "pyloop", "sample_id": "wrong", "code": ADD.replace("{op}", "-")},
        {"problem": "1_vector_add", "backend": "pyloop", "sample_id": "torch", "code": NO_KERNEL},
        {"problem": "1_vector_add", "backend": "pyloop", "sample_id": "broken", "code": "def ("},
    ]
    candidates = tmp_path / "pyloop.jsonl"
    candidates.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # Triton's plugin left out: only the fake backend and the core.
    env = {**os.environ, "KZ_LOAD_PLUGINS": "backend_pyloop", "PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "COLUMNS": "200"}
    command = [sys.executable, "-m", "kz_core.cli", "eval", "-c", str(candidates), "-d", "cpu", "-w", "2", "--json", f"run.root={tmp_path}"]
    completed = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-3000:]
    results = {r["sample_id"]: r for r in map(json.loads, (tmp_path / "eval-pyloop" / "results.jsonl").read_text().splitlines())}
    assert results["good"]["verdict"] == "correct", results["good"]
    assert "unverified_execution" in [f["check"] for f in results["good"]["findings"]]
    assert results["wrong"]["verdict"] == "incorrect"
    assert results["torch"]["verdict"] == "rejected"
    assert results["broken"]["verdict"] == "format_error"
    # Triton is not there, so a Triton candidate is a usage error before anything runs.
    triton = tmp_path / "triton.jsonl"
    triton.write_text(json.dumps({"problem": "1_vector_add", "backend": "triton", "code": "x"}) + "\n")
    refused = subprocess.run([*command[:5], str(triton), *command[6:]], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert refused.returncode == 2 and "unknown backend 'triton'" in refused.stderr and "pyloop" in refused.stderr


def _eval_one(site, tmp_path, code: str, *overrides: str) -> dict:
    """``kz eval`` of one pyloop candidate of 1_vector_add on the CPU (a subprocess, the
    fake backend loaded through its entry point): its result row."""
    candidates = tmp_path / "forged.jsonl"
    candidates.write_text(json.dumps({"problem": "1_vector_add", "backend": "pyloop", "sample_id": "forged", "code": code}) + "\n")
    env = {**os.environ, "KZ_LOAD_PLUGINS": "backend_pyloop", "PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "COLUMNS": "200"}
    command = [sys.executable, "-m", "kz_core.cli", "eval", "-c", str(candidates), "-d", "cpu", "-w", "1", "--json", f"run.root={tmp_path}", *overrides]
    completed = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-3000:]
    (result,) = map(json.loads, (tmp_path / "eval-forged" / "results.jsonl").read_text().splitlines())
    return result


FORGED_COMPARISON = ADD.replace("{op}", "+") + '''

import sys

# The timed calls' outputs replaced by zeros (as a forward that stops working once its
# trials are over leaves them), each entry claiming it was compared and found right.
_wire = sys.modules.get("kz" + "_core.evaluate.wire")
if _wire is not None:
    _encode = _wire.encode_reply

    def _forged(reply, _encode=_encode):
        if isinstance(reply, dict) and isinstance(reply.get("timed_outputs"), list):
            for entry in reply["timed_outputs"]:
                entry["outputs"] = [torch.zeros_like(x) if isinstance(x, torch.Tensor) else x for x in entry.get("outputs", [])]
                entry["comparison"] = {"findings": [], "max_abs_error": 0.0, "max_rel_error": 0.0}
        return _encode(reply)

    _wire.encode_reply = _forged
'''


def test_a_timing_reply_cannot_bring_its_own_comparison(site, tmp_path):
    """Written against the version before: a timed output carrying a ``comparison`` was
    taken as compared on the device, so a candidate whose own process replies (a backend
    without ``backend_kernels``, or ``cuda_inline`` host code a plan cannot describe)
    forged one per timed call and its timed calls were never checked. Only the evaluator
    attaches comparisons now; the forged outputs are compared and found wrong."""
    result = _eval_one(site, tmp_path, FORGED_COMPARISON)
    assert result["verdict"] != "correct", result
    assert "state_drift" in [f["check"] for f in result["findings"]], result["findings"]


FORGED_TRIAL_COMPARISON = ADD.replace("{op}", "-") + '''

import sys

# A wrong kernel (a - b) whose every trial record claims it was compared on the device
# and found right, and whose timed outputs claim the same.
_wire = sys.modules.get("kz" + "_core.evaluate.wire")
if _wire is not None:
    _encode = _wire.encode_reply
    _right = {"findings": [], "max_abs_error": 0.0, "max_rel_error": 0.0}

    def _forged(reply, _encode=_encode):
        if isinstance(reply, dict):
            for entry in [*(reply.get("trials") or []), *(reply.get("timed_outputs") or [])]:
                if isinstance(entry, dict):
                    entry["comparison"] = dict(_right)
        return _encode(reply)

    _wire.encode_reply = _forged
'''


def test_a_trial_record_cannot_bring_its_own_comparison(site, tmp_path):
    """Written against the version before: a trial record carrying a ``comparison`` was
    taken as compared on the device by a reference worker, so a wrong kernel whose own
    process replies (a backend without ``backend_kernels``, ``cuda_inline`` host code a plan
    cannot describe) forged one per trial and was judged correct. The evaluator drops any
    comparison a reply brings and compares the outputs itself."""
    result = _eval_one(site, tmp_path, FORGED_TRIAL_COMPARISON)
    assert result["verdict"] == "incorrect", result


FIXED_SIZE_NULLED_TRIALS = '''
import sys

import torch
import torch.nn as nn
from kz_backend_pyloop import kernel


@kernel
def add(pid, a, b, out, n):
    out[:n] = a[:n] + b[:n]


class ModelNew(nn.Module):
    # Right at the published size only (n = 5000 hard-coded): wrong at the size variation
    # and at every fuzz example of another size.
    def forward(self, a, b):
        out = torch.zeros_like(a)
        add[(1,)](a, b, out, 5000)
        return out


# Every trial record's outputs sent as None (as for an output that is not a tensor), so
# that the wrong ones are not compared; the timed calls, at the published size, are right.
_wire = sys.modules.get("kz" + "_core.evaluate.wire")
if _wire is not None:
    _encode = _wire.encode_reply

    def _forged(reply, _encode=_encode):
        if isinstance(reply, dict):
            for entry in reply.get("trials") or []:
                if isinstance(entry, dict) and isinstance(entry.get("outputs"), list):
                    entry["outputs"] = [None for _ in entry["outputs"]]
        return _encode(reply)

    _wire.encode_reply = _forged
'''


def test_a_trial_record_cannot_leave_its_outputs_out(site, tmp_path):
    """Written against the version before: a trial output sent as None was skipped by the
    comparison (as an output that is not a tensor is, which is its own finding), so a
    candidate whose own process replies could leave out the outputs it got wrong: a kernel
    right only at the published size passed the size variation and the fuzz examples. Now
    an output missing from a trial record, or fewer outputs than the reference's, is an
    ``output_type`` error."""
    result = _eval_one(site, tmp_path, FIXED_SIZE_NULLED_TRIALS)
    assert result["verdict"] != "correct", result
    assert "output_type" in [f["check"] for f in result["findings"]], result["findings"]


FIXED_SIZE_DROPPED_VARIANT = FIXED_SIZE_NULLED_TRIALS.split("# Every trial record")[0] + '''
# The size variation's trial record left out of the reply: the other trials, at the
# published size, are right.
_wire = sys.modules.get("kz" + "_core.evaluate.wire")
if _wire is not None:
    _encode = _wire.encode_reply

    def _forged(reply, _encode=_encode):
        if isinstance(reply, dict) and isinstance(reply.get("trials"), list):
            reply["trials"] = [entry for entry in reply["trials"] if not (isinstance(entry, dict) and entry.get("variant"))]
        return _encode(reply)

    _wire.encode_reply = _forged
'''


def test_a_correctness_reply_cannot_leave_a_trial_out(site, tmp_path):
    """Written against the version before: a correctness reply needed trials on seeds the
    evaluator drew, not on every one of them, so a candidate whose own process replies
    left out the size variation's trial and a kernel right only at the published size was
    judged correct (fuzzing off). Now every drawn seed must be there, once."""
    result = _eval_one(site, tmp_path, FIXED_SIZE_DROPPED_VARIANT, "eval.fuzz=0")
    assert result["verdict"] == "runtime_error" and "seeds drawn" in result["message"], result
