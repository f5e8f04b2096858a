"""kz problems audit flags problems a cheater can pass, and leaves honest ones alone."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kz_core.config import load_config
from kz_core.evaluate.audit import audit_problems
from kz_core.model import Problem

TEMPLATE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return {body}

def get_inputs():
    return [torch.randn(64, 8)]

def get_init_inputs():
    return []
"""

PROBLEMS = {
    "honest": ("x * 2 + 1", []),
    "softmax_sum": ("torch.softmax(x, dim=0).sum(dim=0)", ["constant_passes"]),
    "ignores_input": ("torch.ones(3) * 7", ["input_independent", "constant_passes"]),
    "dropout": ("torch.nn.functional.dropout(x, 0.5, training=True)", ["nondeterministic"]),
    "log_of_negative": ("torch.log(x)", ["non_finite"]),
    "raises": ("x.nonexistent()", ["reference_error"]),
}


@pytest.fixture(scope="module")
def audits():
    problems = [Problem(name, TEMPLATE.format(body=body)) for name, (body, _) in PROBLEMS.items()]
    config = load_config(None, ["eval.workers=2"]).eval
    return {a.problem: a for a in audit_problems(problems, config, "cpu")}


@pytest.mark.parametrize("name", PROBLEMS)
def test_audit_flags(name, audits):
    assert sorted(audits[name].flags) == sorted(PROBLEMS[name][1]), audits[name].findings


def test_kz_problems_audit_command_on_the_examples():
    completed = subprocess.run(
        [sys.executable, "-m", "kz_core.cli", "problems", "audit", "--device", "cpu", "--json", "eval.workers=2"],
        capture_output=True, text=True, check=True,
    )
    rows = json.loads(completed.stdout)
    assert len(rows) >= 6
    assert all(row["findings"] == [] for row in rows), rows


def test_an_audited_problem_runs_in_the_sandbox(tmp_path, monkeypatch):
    """A problem file may come from anywhere (a dataset on the Hub, the Proposer's pool): its
    code runs in a sandboxed reference worker, which cannot write beside the caller nor read
    the caller's secrets. The version before ran it in a plain child process with the
    user's rights: the file was planted and the token read (a ``reference_error`` here)."""
    from kz_core.evaluate.isolation import support

    if not support().landlock_abi:
        pytest.skip("this kernel has no Landlock")
    monkeypatch.setenv("HF_TOKEN", "kz_secret_token")
    planted = tmp_path / "planted.txt"
    code = TEMPLATE.format(body="x * 2 + 1") + (
        "\nimport os\n"
        "try:\n"
        f"    open({str(planted)!r}, 'w').write('x')\n"
        "except OSError:\n"
        "    pass\n"
        "if 'kz_secret_token' in str(os.environ):\n"
        "    raise RuntimeError('read the caller token')\n"
    )
    config = load_config(None, ["eval.workers=1"]).eval
    (audit,) = audit_problems([Problem("reaches_out", code)], config, "cpu")
    assert audit.flags == [], audit.findings
    assert not planted.exists()
