"""Run directories and logging: config.yaml and a log file inside the run directory."""

from __future__ import annotations

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
