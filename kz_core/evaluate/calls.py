"""Calling a worker: a reply, or the failure as a finding (timeout, crash, raised error).

Shared by the evaluator and the reference service. Runs in the caller; it reads replies
as data only.
"""

from __future__ import annotations

from typing import Any

from kz_core.evaluate.sandbox import WorkerDied, WorkerError, WorkerProcess, WorkerTimeout
from kz_core.model import Finding, Problem

_WHERE = {
    "compile": "while loading or compiling",
    "init": "while constructing ModelNew",
    "run": "while running forward",
    "timing": "while timing",
}


def problem_payload(problem: Problem) -> dict[str, Any]:
    """What a worker needs to load a problem."""
    return {"name": problem.name, "code": problem.code, "hash": problem.content_hash}


def trim_traceback(text: str, lines: int = 12) -> str:
    """The end of a traceback, without the worker's own frames."""
    kept = [line for line in text.strip().splitlines() if "kz_core/evaluate/" not in line]
    return "\n".join(kept[-lines:])


def stage_failure(reply: dict[str, Any]) -> Finding:
    """The finding for a reply that says a stage raised (compile_error or runtime_error)."""
    stage = reply.get("stage", "")
    check = "compile_error" if stage == "compile" else "runtime_error"
    message = f"{reply.get('message', 'failed')} ({_WHERE.get(stage, f'in stage {stage}')})"
    trace = reply.get("traceback", "")
    if trace:
        message += "\n" + trim_traceback(trace)
    return Finding(check, message)


def call_worker(worker: WorkerProcess, request: dict[str, Any], timeout: float, stage: str, files: tuple[Any, ...] = ()) -> tuple[dict[str, Any] | None, Finding | None]:
    """One request; a timeout, a dead worker or a failed stage comes back as a finding.

    A reply that reports a fatal CUDA error retires the worker (its context is unusable),
    whether the request failed or the worker could still reply with its results.
    ``files``: sealed reply files the request's tensors may be passed by (``WorkerProcess.call``).
    """
    try:
        reply = worker.call(request, timeout=timeout, files=files) if files else worker.call(request, timeout=timeout)
    except WorkerTimeout as exc:
        return None, Finding("timeout", f"{stage}: {exc}")
    except WorkerDied as exc:
        tail = worker.log_tail(1500).strip()
        return None, Finding("worker_died", f"{stage}: {exc}" + (f"\nworker output:\n{tail}" if tail else ""))
    except WorkerError as exc:
        return None, Finding("worker_died", f"{stage}: {exc}")
    if reply.get("cuda_error"):
        worker.kill()  # a fatal CUDA error, even in a reply that still carries results
    if not reply.get("ok"):
        return reply, stage_failure(reply)
    return reply, None
