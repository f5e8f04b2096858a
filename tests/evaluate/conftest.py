"""Fixtures for evaluator tests: example problems, candidates and cheats, CPU evaluators."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest

from kz_core.config import load_config
from kz_core.evaluate import Evaluator
from kz_core.model import Candidate
from kz_core.problems import load_problems

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_CANDIDATES = REPO / "examples" / "candidates"
CHEATS = REPO / "tests" / "cheats"
HEADER = re.compile(r"^# (problem|expect|check|gpu_only|backend|hack|class|destructive|needs): (.*?)\s*(?:\(.*)?$", re.MULTILINE)


def cheat_header(path: Path) -> dict[str, str]:
    """The machine-readable header of a cheating candidate (backend: its folder's name
    unless the header names one)."""
    header = {key: value.strip() for key, value in HEADER.findall(path.read_text())}
    header.setdefault("backend", path.parent.name)
    return header


def wrong_output_family(check: str) -> set[str]:
    """The checks that count as catching a cheat whose header names ``check`` (one check,
    or alternatives joined by ``|``): unwritten memory reads back as NaN poison on a GPU,
    so ``mismatch`` may be reported as ``non_finite`` there."""
    names = set(check.split("|"))
    return names | {"non_finite"} if "mismatch" in names else names


def cheat_paths() -> list[Path]:
    """Every cheating candidate, of every backend (``tests/cheats/<backend>/*.py``)."""
    return sorted(CHEATS.glob("*/*.py"))


def cheat_needs_met(path: Path) -> bool:
    """Whether this machine gives the sandbox what a cheat's ``needs`` header names, the
    defence that catches it (``pids_cgroup``, ``memory_cgroup``: a cgroup per worker).
    kz reports a machine without it (``kz plugins``, ``kz eval``, every result)."""
    need = cheat_header(path).get("needs", "")
    if not need:
        return True
    from kz_core.evaluate.isolation import support

    return need.removesuffix("_cgroup") in support().cgroups


def cheat_id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def gpu_cheat_params(paths: list[Path]) -> list:
    """``paths`` as pytest parameters for the GPU suites. cuda_inline cheats that must be
    built (about a minute each) skip here: ``plugins/backend_cuda/tests/test_gpu_inline.py``
    builds them in parallel and checks each against its header."""
    reason = "cuda_inline cheats are built in one parallel batch and judged in plugins/backend_cuda/tests/test_gpu_inline.py"
    lacking = "the defence that catches this cheat is not given by this machine (kz reports it): see its needs header"
    return [
        pytest.param(p, marks=pytest.mark.skip(reason=reason))
        if cheat_header(p)["backend"] == "cuda_inline" and cheat_header(p)["gpu_only"] == "true"
        else pytest.param(p, marks=pytest.mark.skip(reason=lacking))
        if not cheat_needs_met(p)
        else p
        for p in paths
    ]


#: A problem with one 1024 x 1024 linear layer (4 MiB of weights): where its models are built.
LINEAR_PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return self.linear(x)


features = 1024
batch_size = 64


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
"""


def cheat_candidate(path: Path) -> Candidate:
    header = cheat_header(path)
    return Candidate(problem=header["problem"], backend=header["backend"], code=path.read_text(), sample_id=cheat_id(path))


def example_candidates(backend: str = "triton") -> list[Candidate]:
    return [
        Candidate(problem=path.stem, backend=backend, code=path.read_text(), sample_id=f"example-{path.stem}")
        for path in sorted((EXAMPLE_CANDIDATES / backend).glob("*.py"))
    ]


def eval_config(*overrides: str):
    return load_config(None, ["eval.device=cpu", "eval.workers=2", "eval.cache=false", *overrides]).eval


@pytest.fixture(scope="session")
def example_problems():
    return load_problems("examples").problems


@pytest.fixture(scope="module")
def cpu_evaluator(example_problems):
    """One CPU evaluator shared by a test module (workers start once). Calls get the
    default 120 s: CI runs three test processes on two cores, where a scanning cheat's
    trials under Triton's interpreter once took past 60 s."""
    with Evaluator(example_problems, eval_config("eval.run_timeout_s=120")) as evaluator:
        yield evaluator


@pytest.fixture(scope="module")
def gpu_evaluator(example_problems):
    """A GPU evaluator (skips without a CUDA device)."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")
    config = load_config(None, ["eval.device=cuda", "eval.workers=2", "eval.cache=false"]).eval
    with Evaluator(example_problems, config) as evaluator:
        yield evaluator


@contextlib.contextmanager
def reference_pool(tmp_path):
    """A pool of one reference worker on the CPU, forked by a zygote of its own."""
    from kz_core.evaluate.sandbox import SandboxSettings, WorkerPool, ZygoteProcess

    settings = SandboxSettings(scratch_root=tmp_path)
    zygote = ZygoteProcess("cpu", settings)
    pool = WorkerPool("cpu", "reference", 1, settings, zygote=zygote, single_use=False)
    try:
        yield pool
    finally:
        pool.close()
        zygote.close()
