"""Evaluation on a Ray cluster (``eval.engine=ray``): one evaluator actor per GPU.

RL post-training stacks run on Ray, and evaluation outgrows one host. With
``eval.engine=ray`` an :class:`~kz_core.evaluate.Evaluator` is a router, as it is over the
GPUs of one host, whose lanes are Ray actors: each actor builds an ordinary single-device
``Evaluator`` (its own zygote, sandboxed workers, references, memory budget and timing
lock) on the node Ray placed it on, one per GPU of the cluster (one per node with CPUs
when the cluster has no GPU, or ``eval.ray_actors``). The driver keeps the journal and
decides nothing else: candidates and results cross as JSON data, every verdict is reached
by the actor's evaluator exactly as on one host.

A node that dies loses only the candidates in flight on its actors: the driver drops the
lane and evaluates them again on another (``RayLaneLost``). ``eval.ray_address`` (or
``kz eval --ray ADDRESS``) names the cluster: ``auto`` for the one this machine belongs
to, empty for a local one started for the run.
"""

from __future__ import annotations

from typing import Any

from kz_core.errors import KzError
from kz_core.model import Candidate, EvalResult, Problem
from kz_core.serialization import from_json_dict, to_json_dict


class RayLaneLost(Exception):
    """The actor behind a lane died (its node was lost): its candidates go elsewhere."""


class RayEngineError(KzError, RuntimeError):
    """Ray is missing or the cluster cannot host an evaluator."""


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise RayEngineError("eval.engine=ray needs Ray: pip install 'kz-core[ray]' (or pip install ray)") from exc
    return ray


class _EvaluatorActor:
    """A single-device evaluator inside a Ray actor (``ray.remote`` applied on use)."""

    def __init__(self, problems: list[dict[str, Any]], config: dict[str, Any], device: str):
        from omegaconf import OmegaConf

        from kz_core.evaluate.evaluator import Evaluator

        section = OmegaConf.create({**config, "device": device, "devices": [], "engine": "local"})
        self.evaluator = Evaluator([from_json_dict(Problem, p) for p in problems], section)

    def describe(self) -> dict[str, Any]:
        import socket

        import torch

        isolation = self.evaluator.isolation
        return {
            "device": self.evaluator.device,
            "workers": self.evaluator.workers,
            "torch": torch.__version__,
            "host": socket.gethostname(),
            "isolation": isolation.summary(),
            "missing": list(isolation.missing()),
        }

    def add_problems(self, problems: list[dict[str, Any]]) -> None:
        for data in problems:
            problem = from_json_dict(Problem, data)
            self.evaluator.problems[problem.name] = problem

    def evaluate_one(self, candidate: dict[str, Any]) -> dict[str, Any]:
        return to_json_dict(self.evaluator.evaluate_one(from_json_dict(Candidate, candidate)))

    def close(self) -> None:
        self.evaluator.close()


class RemoteIsolation:
    """What an actor's sandbox reported (``Support.summary()`` and ``missing()``)."""

    def __init__(self, summary: str, missing: list[str]):
        self._summary = summary
        self._missing = tuple(missing)

    def summary(self) -> str:
        return self._summary

    def missing(self) -> tuple[str, ...]:
        return self._missing


class RayLane:
    """One actor, with what the router asks of a lane (``evaluate_one``, ``workers``).

    :param problems: the router's problems (one dict): a problem added to it later is sent
        to the actor before its first candidate.
    """

    def __init__(self, handle: Any, described: dict[str, Any], problems: dict[str, Problem]):
        self.handle = handle
        self.device = f"ray:{described['host']}:{described['device']}"
        self.actor_device = described["device"]
        self.workers = int(described["workers"])
        self.torch = described["torch"]
        self.isolation = RemoteIsolation(described.get("isolation", ""), described.get("missing", []))
        self.lost = False
        self.problems = problems
        self._sent: set[str] = set(problems)

    def evaluate_one(self, candidate: Candidate) -> EvalResult:
        ray = _ray()
        try:
            if candidate.problem not in self._sent and candidate.problem in self.problems:
                ray.get(self.handle.add_problems.remote([to_json_dict(self.problems[candidate.problem])]))
                self._sent.add(candidate.problem)
            data = ray.get(self.handle.evaluate_one.remote(to_json_dict(candidate)))
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError, ray.exceptions.NodeDiedError) as exc:
            self.lost = True
            raise RayLaneLost(str(exc)) from exc
        return from_json_dict(EvalResult, data)

    def warm_up(self) -> None:
        pass  # the actor's evaluator started its workers on demand, as a local one does

    def close(self) -> None:
        ray = _ray()
        try:
            ray.get(self.handle.close.remote(), timeout=120)
        except Exception:  # noqa: BLE001 - a lost actor has nothing left to close
            pass
        ray.kill(self.handle)


def start_lanes(problems: dict[str, Problem], config: Any) -> tuple[list[RayLane], bool]:
    """Connect to (or start) the cluster and place the evaluator actors: ``(lanes,
    started_here)``, ``started_here`` when this call started Ray (and must shut it down)."""
    ray = _ray()
    from kz_core.config import to_container

    started = False
    if not ray.is_initialized():
        address = str(getattr(config, "ray_address", "") or "") or None
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
        started = True
    resources = ray.cluster_resources()
    gpus = int(resources.get("GPU", 0))
    on_gpu = str(config.device).strip().lower() != "cpu" and gpus > 0
    count = int(getattr(config, "ray_actors", 0) or 0)
    if not count:
        count = gpus if on_gpu else sum(1 for node in ray.nodes() if node.get("Alive") and node.get("Resources", {}).get("CPU", 0) >= 1)
    if count < 1:
        raise RayEngineError(f"the Ray cluster at {getattr(config, 'ray_address', '') or 'this machine'} has no node with a GPU or a CPU for an evaluator")
    settings = {k: v for k, v in to_container(config).items() if k not in ("device", "devices", "engine", "ray_address", "ray_actors")}
    payload = [to_json_dict(p) for p in problems.values()]
    remote = ray.remote(_EvaluatorActor).options(
        num_gpus=1 if on_gpu else 0,
        num_cpus=0 if on_gpu else 1,
        max_concurrency=64,  # the actor's evaluator runs several candidates at once
        max_restarts=0,  # a lost actor's candidates are sent to another by the driver
        scheduling_strategy="SPREAD",
    )
    handles = [remote.remote(payload, settings, "cuda:0" if on_gpu else "cpu") for _ in range(count)]
    described = ray.get([handle.describe.remote() for handle in handles])
    return [RayLane(handle, info, problems) for handle, info in zip(handles, described)], started


def shutdown(started_here: bool) -> None:
    if started_here:
        _ray().shutdown()
