"""GRPO in several processes, one per GPU, through TRL's own route: ``accelerate launch
--num_processes N -m kz_core.cli train coder ...`` (torchrun works the same way).

TRL's GRPOTrainer runs the whole command in every process. Each process generates the
completions of its share of the prompts and calls the reward function on its own
completions only; TRL then gathers the rewards for the advantages. What kz does about it:

- every process has its own evaluator (workers, references, scratch folders named by its
  process id) on its own devices: ``eval.device`` ``auto`` or ``cuda`` becomes the GPU the
  process trains on (it waits, idle, while its rewards are computed, and no other
  process's evaluator times kernels there); ``eval.devices``, when set, is dealt out among
  the processes (process r takes every N-th device from the r-th), so that no two
  evaluators share a GPU's timing lock and memory budget unless there are fewer devices
  than processes;
- a prompt's group of ``num_generations`` completions stays in one process
  (``per_device_train_batch_size`` is a multiple of ``num_generations``), so CA-GRPO's
  per-group gate sees the whole group;
- all processes write their results to the run's one journal (SQLite's file locks
  serialise the writers: ``kz_core.store``); process 0 alone writes the run's
  ``config.yaml``, the lines of ``metrics.jsonl`` (one per step, the processes' reward
  records merged: ``CoderReward.merge_step_records``), ``final/`` and the summary, and
  opens the run folder before the others; the others log to their own files
  (``kz.rank<N>.log``) and show only warnings on the console.

This module decides where each process stands and what it owns; it trains nothing. In a
process that was not launched by accelerate or torchrun everything here is a no-op.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from loguru import logger

from kz_policy_hf.errors import PolicyError
from kz_policy_hf.loading import resolve_device


@dataclass(frozen=True)
class TrainingProcesses:
    """Where this process stands among the processes that train one policy together."""

    #: 0 .. count - 1; process 0 writes the run's files.
    rank: int
    #: Processes training together (1: not launched by accelerate or torchrun).
    count: int
    #: The device this process trains on (``cpu``, ``cuda:N``).
    device: str

    @property
    def main(self) -> bool:
        return self.rank == 0


def trains_on_gpu(config: Any) -> bool:
    """Whether the policy trains on GPUs: ``policy.device``, unless ``accelerate launch
    --cpu`` asked for the CPU."""
    if os.environ.get("ACCELERATE_USE_CPU", "").strip().lower() in ("1", "true", "yes"):
        return False
    return resolve_device(config.policy.device).type == "cuda"


def training_processes(config: Any) -> TrainingProcesses:
    """Join the launcher's process group, on the backend TRL's trainer will use (NCCL on
    GPUs, gloo on a CPU), and say where this process stands.

    :raises PolicyError: a policy.device torch cannot use.
    """
    from accelerate import PartialState

    state = PartialState(cpu=not trains_on_gpu(config))
    return TrainingProcesses(rank=state.process_index, count=state.num_processes, device=str(state.device))


@contextlib.contextmanager
def main_process_first(processes: TrainingProcesses) -> Iterator[None]:
    """Run the block in process 0 first, then in the others (which wait for it)."""
    if processes.count == 1:
        yield
        return
    from accelerate import PartialState

    with PartialState().main_process_first():
        yield


def finish(processes: TrainingProcesses) -> None:
    """Wait for every process, then leave the process group (NCCL warns at exit otherwise)."""
    if processes.count == 1:
        return
    from accelerate import PartialState

    state = PartialState()
    state.wait_for_everyone()
    state.destroy_process_group()


def gather(value: Any, processes: int) -> list[Any]:
    """``value`` of every process, in rank order (a collective: every process calls it)."""
    if processes == 1:
        return [value]
    from accelerate.utils import gather_object

    return list(gather_object([value]))


def evaluation_for_process(config: Any, processes: TrainingProcesses) -> Any:
    """The config with this process's evaluation devices (see the module docstring).

    :raises PolicyError: ``eval.engine=ray`` with several processes.
    """
    if processes.count == 1:
        return config
    from omegaconf import OmegaConf

    if str(config.eval.engine) == "ray":
        raise PolicyError(
            "eval.engine=ray with several training processes: each process would place its own "
            "evaluator actors on every GPU of the cluster; use eval.engine=local (each process "
            "evaluates on its own GPU) or train in one process"
        )
    listed = [str(device) for device in (config.eval.devices or [])]
    if listed:
        share = listed[processes.rank :: processes.count] or [listed[processes.rank % len(listed)]]
        if len(listed) < processes.count and share[0].strip().lower() != "cpu":
            logger.warning(
                "eval.devices lists {} device(s) for {} training processes: process {} shares {} with another "
                "process's evaluator (their timings disturb each other; list one device per process or more)",
                len(listed), processes.count, processes.rank, share[0],
            )
        return OmegaConf.merge(config, {"eval": {"devices": share}})
    if processes.device.startswith("cuda") and str(config.eval.device).strip().lower() in ("auto", "cuda"):
        return OmegaConf.merge(config, {"eval": {"device": processes.device}})
    return config
