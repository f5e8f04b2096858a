"""Sandboxed worker processes and the pools that hold them (parent side).

A :class:`WorkerProcess` is ``python -m kz_core.evaluate.worker`` started in a new session
(its own process group) with an environment reduced to an allowlist, resource limits, and
a scratch folder. Requests go over a socket pair; every call has a hard wall-clock
timeout, after which the whole process group is killed, along with any process that
carries the worker's marker in its environment (children that left the group). A worker
that died, hung or hit a fatal CUDA error is retired; its :class:`WorkerPool` starts a
replacement on the next request. Torch and the device start once per worker.

This module never imports or runs candidate code; it starts processes and moves messages.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
from loguru import logger

from kz_core.evaluate import wire
from kz_core.paths import cache_dir

#: Variables a worker may inherit; everything else (tokens, keys, cloud credentials) is
#: dropped before model-written code can read it.
ENV_ALLOWLIST = frozenset(
    """PATH HOME USER LOGNAME LANG LANGUAGE LC_ALL LC_CTYPE TZ TMPDIR PYTHONPATH PYTHONHASHSEED
    VIRTUAL_ENV CUDA_VISIBLE_DEVICES CUDA_HOME CUDA_PATH CUDA_DEVICE_ORDER LD_LIBRARY_PATH
    NVIDIA_VISIBLE_DEVICES NVIDIA_DRIVER_CAPABILITIES TRITON_CACHE_DIR TRITON_HOME
    TRITON_PTXAS_PATH TRITON_LIBCUDA_PATH TORCH_HOME TORCHINDUCTOR_CACHE_DIR
    TORCH_EXTENSIONS_DIR TORCH_CUDA_ARCH_LIST CC CXX KZ_LOAD_PLUGINS KZ_CACHE_DIR
    XDG_CACHE_HOME MAX_JOBS""".split()
)
#: Even an allow-listed name is dropped when it looks like a secret.
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE", re.IGNORECASE)
MARKER_VARIABLE = "KZ_WORKER_MARKER"


class WorkerError(Exception):
    """A worker could not answer: it died, hung, or sent something unreadable."""


class WorkerTimeout(WorkerError):
    """A request ran past its wall-clock limit; the worker's process group was killed."""


class WorkerDied(WorkerError):
    """The worker process ended (crash, signal, ``os._exit``) before it replied."""


class WorkerStartError(WorkerError):
    """A worker could not start (torch or the device failed to initialise)."""


@attrs.frozen
class SandboxSettings:
    """Limits and placement of worker processes (see ``EvalConfig`` for meanings)."""

    scratch_root: Path
    address_space_bytes: int = 0
    file_size_bytes: int = 1 << 30
    cpu_budget_s: int = 0
    threads: int = 1
    start_timeout_s: float = 180.0
    max_reply_bytes: int = wire.DEFAULT_MAX_REPLY_BYTES
    tf32: bool = False
    extra_env: tuple[tuple[str, str], ...] = ()


def scrubbed_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The parent's environment reduced to :data:`ENV_ALLOWLIST`, minus secret-looking names."""
    env = {k: v for k, v in os.environ.items() if (k in ENV_ALLOWLIST or k.startswith("LC_")) and not SECRET_NAME.search(k)}
    env.update(extra or {})
    return env


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def kill_marked_processes(marker: str) -> int:
    """SIGKILL every process whose environment carries ``marker``; returns how many."""
    needle = f"{MARKER_VARIABLE}={marker}".encode()
    killed = 0
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                os.kill(int(entry.name), signal.SIGKILL)
                killed += 1
        except (OSError, ValueError):
            continue
    return killed


class WorkerProcess:
    """One sandboxed worker and the socket to it."""

    def __init__(self, device: str, role: str, settings: SandboxSettings):
        self.device = device
        self.role = role
        self.settings = settings
        self.marker = secrets.token_hex(8)
        self.uses = 0
        self.retired = False
        settings.scratch_root.mkdir(parents=True, exist_ok=True)
        self.scratch = Path(os.path.realpath(settings.scratch_root)) / f"{role}-{self.marker}"
        self.scratch.mkdir(parents=True)
        self.log_path = self.scratch / "worker.log"
        parent_sock, child_sock = socket.socketpair()
        self.sock = parent_sock
        env = scrubbed_environment(dict(settings.extra_env))
        env[MARKER_VARIABLE] = self.marker
        env["HOME"] = str(self.scratch)
        env["TMPDIR"] = str(self.scratch)
        env.setdefault("OMP_NUM_THREADS", str(settings.threads))
        # HOME is the scratch folder; compile caches (NVRTC cubins) stay in the user's cache.
        env.setdefault("KZ_CACHE_DIR", str(cache_dir()))
        env.setdefault("TRITON_CACHE_DIR", str(self.scratch / "triton-cache"))
        if device == "cpu":
            env["TRITON_INTERPRET"] = "1"
            env["CUDA_VISIBLE_DEVICES"] = ""
        log = open(self.log_path, "wb")  # noqa: SIM115 - the child owns it from here
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "kz_core.evaluate.worker", str(child_sock.fileno())],
                pass_fds=[child_sock.fileno()],
                env=env,
                cwd=self.scratch,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            child_sock.close()
            log.close()
        limits = {
            "address_space_bytes": settings.address_space_bytes if device == "cpu" else 0,
            "file_size_bytes": settings.file_size_bytes,
        }
        init = {
            "device": device,
            "role": role,
            "scratch_root": str(self.scratch),
            "limits": limits,
            "cpu_budget_s": settings.cpu_budget_s,
            "tf32": settings.tf32,
        }
        try:
            hello = self.call({"op": "init", **init}, timeout=settings.start_timeout_s, _raw_init=True)
        except WorkerError as exc:
            self.kill()
            raise WorkerStartError(f"a {role} worker on {device} did not start: {exc}") from exc
        if not hello.get("ok"):
            self.kill()
            raise WorkerStartError(f"a {role} worker on {device} did not start: {hello.get('message')}\n{hello.get('traceback', '')}")
        self.identity: dict[str, Any] = hello["identity"]
        logger.debug("started {} worker pid {} on {}", role, self.process.pid, device)

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_tail(self, size: int = 3000) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        return data[-size:].decode("utf-8", errors="replace")

    def describe_exit(self) -> str:
        code = self.process.poll()
        if code is None:
            return "the worker stopped answering"
        if code < 0:
            return f"the worker was killed by {_signal_name(code)}"
        return f"the worker process exited with status {code} before replying"

    def call(self, request: dict[str, Any], timeout: float, _raw_init: bool = False) -> dict[str, Any]:
        """Send one request and wait at most ``timeout`` seconds for the reply."""
        if self.retired:
            raise WorkerDied("this worker was retired")
        deadline = time.monotonic() + timeout
        try:
            self.sock.settimeout(timeout)
            wire.send_request(self.sock, request)
            self.sock.settimeout(max(0.001, deadline - time.monotonic()))
            reply = wire.recv_reply(self.sock, self.settings.max_reply_bytes)
        except (TimeoutError, socket.timeout) as exc:
            self.kill()
            raise WorkerTimeout(f"no reply within {timeout:g} s; the worker's process group was killed") from exc
        except (wire.WireError, ConnectionError, OSError) as exc:
            # Give the process a moment to be reaped so that its exit status is known.
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=2)
            reason = self.describe_exit()
            self.kill()
            raise WorkerDied(f"{reason} ({exc})") from exc
        if not isinstance(reply, dict):
            self.kill()
            raise WorkerDied(f"the worker sent a malformed reply of type {type(reply).__name__}")
        return reply

    def kill(self) -> None:
        """Kill the worker's whole process group and any marked stragglers; idempotent."""
        self.retired = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        kill_marked_processes(self.marker)
        with contextlib.suppress(OSError):
            self.sock.close()

    def shutdown(self) -> None:
        """Ask the worker to exit, then make sure it and its children are gone."""
        if not self.retired:
            with contextlib.suppress(OSError, wire.WireError):
                self.sock.settimeout(2)
                wire.send_request(self.sock, {"op": "shutdown"})
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)
        self.kill()
        _remove_tree(self.scratch)


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


class WorkerPool:
    """Up to ``size`` workers of one role on one device, started on demand."""

    def __init__(self, device: str, role: str, size: int, settings: SandboxSettings, recycle_after: int = 0):
        self.device = device
        self.role = role
        self.size = max(1, size)
        self.settings = settings
        self.recycle_after = recycle_after
        self._idle: queue.LifoQueue[WorkerProcess] = queue.LifoQueue()
        self._live = 0
        self._lock = threading.Lock()
        self._closed = False
        self._starting: list[threading.Thread] = []
        self.started = 0
        self.identity: dict[str, Any] | None = None

    def _start(self) -> WorkerProcess:
        try:
            worker = WorkerProcess(self.device, self.role, self.settings)
        except BaseException:
            with self._lock:
                self._live -= 1
            raise
        with self._lock:
            self.started += 1
            self.identity = self.identity or worker.identity
        return worker

    def warm_up(self, count: int | None = None) -> None:
        """Start workers ahead of need (in parallel), up to ``count`` or the pool's size."""
        wanted = min(self.size, count or self.size)
        threads = []
        errors: list[BaseException] = []

        def start_one() -> None:
            try:
                self._idle.put(self._start())
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        with self._lock:
            missing = max(0, wanted - self._live)
            self._live += missing
        for _ in range(missing):
            thread = threading.Thread(target=start_one, daemon=True)
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]

    @contextlib.contextmanager
    def acquire(self) -> Iterator[WorkerProcess]:
        """A worker for exclusive use; retired workers are replaced on the next acquire."""
        if self._closed:
            raise WorkerError("the pool is closed")
        worker = None
        with self._lock:
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                if self._live < self.size:
                    self._live += 1
                    worker = None
                else:
                    worker = ...  # type: ignore[assignment]
        if worker is ...:
            worker = self._idle.get()
        elif worker is None:
            worker = self._start()
        try:
            yield worker
        finally:
            worker.uses += 1
            if self.recycle_after and worker.uses >= self.recycle_after and not worker.retired:
                worker.shutdown()
            if worker.retired or self._closed:
                if not worker.retired:
                    worker.shutdown()
                else:
                    _remove_tree(worker.scratch)
                self._replace()
            else:
                self._idle.put(worker)

    def _replace(self) -> None:
        """A worker left the pool: start its replacement in the background."""

        def start() -> None:
            try:
                worker = self._start()
            except BaseException as exc:  # noqa: BLE001 - the next acquire starts one again
                if not self._closed:
                    logger.warning("could not start a replacement {} worker on {}: {}", self.role, self.device, exc)
                return
            self._idle.put(worker)

        with self._lock:
            if self._closed:
                self._live -= 1
                return
            thread = threading.Thread(target=start, daemon=True)
            self._starting = [t for t in self._starting if t.is_alive()] + [thread]
            thread.start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            starting = list(self._starting)
        for thread in starting:
            thread.join()
        while True:
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                break
            worker.shutdown()
