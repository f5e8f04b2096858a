"""Run directories and logging: config.yaml and a log file inside the run directory."""

from __future__ import annotations

import pytest

from loguru import logger

from kz_core.config import load_config
from kz_core.logs import console_level, setup_logging
from kz_core.rundir import open_run_dir


def test_run_dir_holds_config_and_log(tmp_path):
    config = load_config(None, [f"run.root={tmp_path}", "run.name=r1", "run.seed=5"])
    setup_logging("WARNING")
    run_dir = open_run_dir(config, command="kz test")
    logger.debug("a debug line for the file only")
    assert run_dir == tmp_path / "r1"
    assert "seed: 5" in (run_dir / "config.yaml").read_text()
    log_text = (run_dir / "kz.log").read_text()
    assert "a debug line for the file only" in log_text
    # Re-opening keeps what was there (resume).
    (run_dir / "done.txt").write_text("finished work")
    assert open_run_dir(config) == run_dir
    assert (run_dir / "done.txt").read_text() == "finished work"
    setup_logging("INFO")


def test_run_dir_default_name_is_a_timestamp(tmp_path):
    config = load_config(None, [f"run.root={tmp_path}", "log.file="])
    run_dir = open_run_dir(config)
    assert run_dir.parent == tmp_path and run_dir.name[:8].isdigit()
    assert not (run_dir / "kz.log").exists()


def test_console_levels():
    assert console_level(1, 0) == "DEBUG"
    assert console_level(0, 1) == "WARNING"
    assert console_level(0, 2) == "ERROR"
    assert console_level(0, 0, default="info") == "INFO"


@pytest.mark.triton
def test_a_failed_command_leaves_no_empty_run_and_logs_why_in_a_kept_one(tmp_path):
    import os
    import subprocess
    import sys

    def kz(*args):
        return subprocess.run([sys.executable, "-m", "kz_core.cli", *args], capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "COLUMNS": "200"})

    candidates = "examples/candidates/triton"
    from pathlib import Path

    folder = str(Path(__file__).resolve().parents[1] / candidates)
    failed = kz("eval", "-c", folder, "-d", "cuda:7", f"run.root={tmp_path / 'runs'}", "run.name=first")
    assert failed.returncode == 2 and "no CUDA GPU" in failed.stderr
    assert failed.stderr.count("no CUDA GPU") == 1, failed.stderr  # said once
    assert not (tmp_path / "runs" / "first").exists()
    kept = tmp_path / "runs" / "kept"
    kept.mkdir(parents=True)
    (kept / "results.jsonl").write_text("{}\n")  # earlier work: the folder stays
    again = kz("eval", "-c", folder, "-d", "cuda:7", f"run.root={tmp_path / 'runs'}", "run.name=kept")
    assert again.returncode == 2 and (kept / "results.jsonl").exists()
    assert "stopped: EvaluatorError: device 'cuda:7'" in (kept / "kz.log").read_text()


def test_a_failed_command_touches_only_the_runs_it_opened(tmp_path):
    """In one process (a notebook, CliRunner), a command that fails must not remove the
    run folder an earlier, successful command created."""
    import click
    from click.testing import CliRunner

    from kz_core.cli import KzGroup
    from kz_core.errors import KzError

    group = KzGroup(name="kz-test")

    @group.command(name="open")
    @click.argument("name")
    def open_run(name):
        open_run_dir(load_config(None, [f"run.root={tmp_path}", f"run.name={name}"]))

    @group.command(name="fail")
    def fail():
        open_run_dir(load_config(None, [f"run.root={tmp_path}", "run.name=second"]))
        raise KzError("stopped on purpose")

    assert CliRunner().invoke(group, ["open", "first"]).exit_code == 0
    assert CliRunner().invoke(group, ["fail"]).exit_code == 2
    assert (tmp_path / "first").is_dir() and not (tmp_path / "second").exists()


def test_a_second_training_process_only_logs_to_its_own_file(tmp_path):
    """Processes of one run (accelerate launch): process 0 writes config.yaml and kz.log,
    process N writes kz.rank<N>.log and nothing else."""
    from kz_core.rundir import rank_log_name

    assert rank_log_name("kz.log", 0) == "kz.log" and rank_log_name("kz.log", 3) == "kz.rank3.log"
    assert rank_log_name("run", 1) == "run.rank1"
    setup_logging("WARNING")
    first = open_run_dir(load_config(None, [f"run.root={tmp_path}", "run.name=r", "run.seed=5"]), command="kz test")
    (first / "config.yaml").write_text("process 0's config")
    second = open_run_dir(load_config(None, [f"run.root={tmp_path}", "run.name=r", "run.seed=6"]), command="kz test", rank=1)
    logger.debug("a line of process 1")
    setup_logging("INFO")
    assert second == first
    assert (first / "config.yaml").read_text() == "process 0's config"
    assert "re-opened run directory" in (first / "kz.rank1.log").read_text() and "(process 1)" in (first / "kz.rank1.log").read_text()


def test_a_failed_run_that_holds_only_its_processes_logs_is_removed(tmp_path):
    from kz_core.rundir import OPENED, close_failed_runs

    since = len(OPENED)
    try:
        run_dir = open_run_dir(load_config(None, [f"run.root={tmp_path}", "run.name=failed"]))
        (run_dir / "kz.rank1.log").write_text("process 1 stopped too\n")
        assert close_failed_runs(RuntimeError("stopped"), since) == [run_dir]
        assert not run_dir.exists()
    finally:
        del OPENED[since:]
    setup_logging("INFO")
