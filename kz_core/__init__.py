"""kz: train language models to write fast, correct GPU kernels (the KernelZero method).

The core holds the plugin system, the data model, configuration, problem sources, the
evaluator, the method's rewards and the ``kz`` command line. This module is the public
API for plugins: everything a plugin may use is importable from ``kz_core`` itself
(``from kz_core import hookimpl, Candidate, CompiledCandidate``), as ``pytest`` re-exports
what plugins need from ``_pytest``. The modules behind these names are the core's own and
may change; ``docs/plugin_api.md`` lists the names by purpose, and a test checks that every
plugin in the repository imports only them. Names are loaded on first use, so that
``import kz_core`` stays cheap (no torch).
"""

from __future__ import annotations

import importlib
from typing import Any

from kz_core.errors import KzError
from kz_core.hookspecs import HookUserError, hookimpl, hookspec

__version__ = "0.1.0"

#: Public name -> (module, attribute in it).
_PUBLIC: dict[str, tuple[str, str]] = {
    # The data model
    **{name: ("kz_core.model", name) for name in (
        "ApiSpec", "BackendInfo", "Candidate", "Completion", "EvalResult", "Finding", "FrontierSelection", "ModuleStats", "Problem", "Prompt",
        "Severity", "TrainingSummary", "Verdict",
    )},
    # Backends: compiling, running, counting, trusted kernels for the executor
    **{name: ("kz_core.backend", name) for name in (
        "CompiledCandidate", "CompileFailure", "KernelCompileError", "LaunchCounter", "RunOutput", "TrustedKernels", "model_new_class", "syntax_failure",
    )},
    "load_module": ("kz_core.evaluate.execution", "load_module"),
    "profiled": ("kz_core.evaluate.execution", "profiled"),
    "record_kernel": ("kz_core.evaluate.recording", "record_kernel"),
    "is_triton_wrapper": ("kz_core.evaluate.execution", "is_triton_wrapper"),
    "shared_build": ("kz_core.evaluate.builds", "shared_build"),
    "defer_build": ("kz_core.evaluate.builds", "defer"),
    "deferring_builds": ("kz_core.evaluate.builds", "deferring"),
    "BuildDeferred": ("kz_core.evaluate.builds", "BuildDeferred"),
    "recording_active": ("kz_core.evaluate.recording", "active"),
    "add_tracer": ("kz_core.evaluate.recording", "add_tracer"),
    "records_plans": ("kz_core.evaluate.recording", "records_plans"),
    "NotReplayable": ("kz_core.evaluate.recording", "NotReplayable"),
    "KernelRef": ("kz_core.evaluate.plans", "KernelRef"),
    "launch_table_memory": ("kz_core.evaluate.plans", "launch_table_memory"),
    "shared_folder": ("kz_core.evaluate.builds", "shared_folder"),
    "COMPILE_TIMEOUT_ENV": ("kz_core.evaluate.builds", "COMPILE_TIMEOUT_ENV"),
    # Source text helpers
    "parse_source": ("kz_core.source", "parse"),
    "source_functions": ("kz_core.source", "functions"),
    "dotted_name": ("kz_core.source", "dotted_name"),
    "string_constants": ("kz_core.source", "string_constants"),
    "extract_code": ("kz_core.parsing", "extract_code"),
    # Configuration, files, commands
    **{name: ("kz_core.config", name) for name in ("ConfigError", "ConfigSection", "KzConfig", "PolicyConfig", "RewardConfig", "grpo_groups")},
    "cache_dir": ("kz_core.paths", "cache_dir"),
    "replace_file": ("kz_core.paths", "replace_file"),
    "CACHE_DIR_ENV": ("kz_core.paths", "CACHE_DIR_ENV"),
    "config_options": ("kz_core.cli", "config_options"),
    "train_group": ("kz_core.commands.train_command", "train_group"),
    "err_console": ("kz_core.cli", "stderr"),
    "setup_logging": ("kz_core.logs", "setup_logging"),
    "open_run_dir": ("kz_core.rundir", "open_run_dir"),
    "load_problems_from_config": ("kz_core.problems", "load_problems_from_config"),
    "ProblemSource": ("kz_core.problems", "ProblemSource"),
    "make_problem": ("kz_core.problems", "make_problem"),
    "get_plugin_manager": ("kz_core.plugins", "get_plugin_manager"),
    # Training: prompts, the method's rewards, the journal, the module pool, the frontier
    "coder_prompt": ("kz_core.prompts", "coder_prompt"),
    "proposer_prompt": ("kz_core.prompts", "proposer_prompt"),
    **{name: ("kz_core.rewards", name) for name in ("API_SEPARATOR", "CoderReward", "ProposerReward", "RewardUnavailableError")},
    "Journal": ("kz_core.evaluate.journal", "Journal"),
    "ModulePool": ("kz_core.proposer.pool", "ModulePool"),
    "POOL_FILE": ("kz_core.proposer.pool", "POOL_FILE"),
    "api_catalog": ("kz_core.proposer.catalog", "api_catalog"),
    "sample_api_sets": ("kz_core.frontier", "sample_api_sets"),
}

__all__ = sorted(["HookUserError", "KzError", "__version__", "hookimpl", "hookspec", *_PUBLIC])


def __getattr__(name: str) -> Any:
    target = _PUBLIC.get(name)
    if target is None:
        raise AttributeError(f"module 'kz_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(target[0]), target[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return list(__all__)
