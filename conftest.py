"""Settings for every test of the repository (tests/ and each plugin's tests/)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Under pytest-xdist, each worker's share of the cores for torch's thread pools (and those
# of the processes its tests start, which inherit the environment), unless the caller set
# one: two workers on two cores, each with torch's default of a thread per core, had four
# OpenMP threads spinning on two cores, and the tests that run a model (kz train, kz
# generate) spent about a third more CPU time than with one thread each. kz's evaluator
# workers already run with one thread on a CPU (kz_core/evaluate/sandbox.py).
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
if _WORKERS > 1:
    _threads = str(max(1, (os.cpu_count() or 1) // _WORKERS))
    for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_variable, _threads)

# Triton in the test processes runs under its interpreter where there is no NVIDIA GPU.
# Triton decides when it is first imported (triton.language's own @jit functions), and a
# test that only runs torch ops on meta tensors imports it through torch._dynamo: a later
# test of the same xdist worker that launches kernels in-process then met those functions
# built for a GPU ("Cannot call @triton.jit'd outside of the scope of a kernel").
if not (Path("/dev/nvidiactl").exists() or shutil.which("nvidia-smi")):
    os.environ.setdefault("TRITON_INTERPRET", "1")

# No wall-clock limits that load can break: the suite runs beside other processes (and in
# parallel with itself, `make test`), where a 200 ms example can take 450.
settings.register_profile("kz", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("kz")


def pytest_configure(config: pytest.Config) -> None:
    """pytest-xdist hands whole files out in the order of the collection below only without
    its ``--loadscope-reorder`` (on by default): that reorders files by their number of
    tests, and files of a few long tests (kz generate, two-process training) were then
    handed out last and ran alone at the end of `make test`."""
    if getattr(config.option, "loadscopereorder", None) is not None:
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files that hold a test marked ``slow`` first, each file's tests in their order:
    `make test` gives whole files to pytest-xdist's workers (``--dist loadfile``) in this
    order, and a long file handed out last would run alone at the end."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)


@pytest.fixture(scope="session")
def suite_shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this test run that every pytest-xdist worker of the run shares (the
    controller's base temporary folder; without xdist, the session's own): for what the
    suite makes once and many tests read. Whatever fills it must hold a file lock while
    it does (two workers may want the same thing at once) and must not change what a test
    finds there in a way another test can see."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "suite-shared"
    folder.mkdir(exist_ok=True)
    return folder
