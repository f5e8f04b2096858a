"""Worker processes and the pools that hold them (parent side).

Two kinds of worker:

- **trusted** workers are ``python -m kz_core.evaluate.worker`` started in a session of
  their own; they never run candidate code and live as long as the pool (problem audits);
- **sandboxed** workers are forked by the evaluator's :class:`ZygoteProcess`
  (``kz_core/evaluate/zygote.py``). ``candidate`` and ``executor`` workers are fresh for
  every candidate: a worker that ran one candidate is killed, never reused. A ``candidate``
  worker runs model-written code in the full sandbox of ``isolation.py`` (its own user,
  PID, mount, network and IPC namespaces, Landlock, seccomp, resource limits); an
  ``executor`` runs only kz's code, the problem's and the candidate's kernels, confined by
  Landlock and seccomp. ``reference`` workers run the problem's code (model-written in
  co-evolution) under Landlock and seccomp too, and each is bound to one problem
  (``WorkerPool.acquire(key)``).

Every worker gets an environment reduced to an allowlist and a scratch folder of its own.
Requests go over a socket pair; every call has a hard wall-clock timeout, after which the
worker and everything it started are killed. A worker that died, hung or hit a fatal
CUDA error is retired; its :class:`WorkerPool` starts a replacement.

This module never imports or runs candidate code; it starts processes and moves messages.
"""

from __future__ import annotations

import collections
import contextlib
import os
import queue
import re
import secrets
import signal
import socket
import stat
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
from kz_core.paths import cache_dir, remove_tree

#: Variables a worker may inherit; everything else (tokens, keys, cloud credentials) is
#: dropped before model-written code can read it.
ENV_ALLOWLIST = frozenset(
    """PATH HOME USER LOGNAME LANG LANGUAGE LC_ALL LC_CTYPE TZ TMPDIR PYTHONPATH PYTHONHASHSEED
    VIRTUAL_ENV CUDA_VISIBLE_DEVICES CUDA_HOME CUDA_PATH CUDA_DEVICE_ORDER LD_LIBRARY_PATH
    NVIDIA_VISIBLE_DEVICES NVIDIA_DRIVER_CAPABILITIES TORCH_HOME TORCHINDUCTOR_CACHE_DIR
    TORCH_EXTENSIONS_DIR TORCH_CUDA_ARCH_LIST CC CXX KZ_LOAD_PLUGINS KZ_CACHE_DIR
    XDG_CACHE_HOME MAX_JOBS""".split()
)
#: Even an allow-listed name is dropped when it looks like a secret.
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE", re.IGNORECASE)
MARKER_VARIABLE = "KZ_WORKER_MARKER"
#: The first part of every marker this process gives its workers: what tells them from the
#: workers of other kz processes on the same machine (a test looks for its own leftovers only).
SESSION_MARKER = secrets.token_hex(6)


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
    #: Parameters and buffers, bytes, from which a problem's models are built on the GPU
    #: (``EvalConfig.device_init_mb``; 0: never).
    device_init_bytes: int = 0
    extra_env: tuple[tuple[str, str], ...] = ()
    #: Open files one sandboxed process may hold: Linux's usual limit. With 4096, a
    #: candidate's 520 processes held a million of the machine's open files (red-team round
    #: 27); now at most about half as many, all of them charged to its cgroup's memory.
    open_files: int = 1024
    #: Processes one sandboxed candidate may run at once (binds only with a uid of its own).
    processes: int = 512
    #: Folders a sandboxed worker may read beyond the system's (``isolation.system_read_paths``).
    read_paths: tuple[str, ...] = ()
    #: Folders whose files a sandboxed worker may open by name but where it lists nothing
    #: (kz's shared builds: a candidate finds its own by their key, never a sibling's).
    lookup_paths: tuple[str, ...] = ()
    #: Folders an *executor* may write beyond its scratch folder (shared kernel caches).
    executor_write_paths: tuple[str, ...] = ()
    #: A sandboxed worker's scratch folder is a bounded memory file system of its own
    #: (``isolation.mount_private_scratch``); not a builder's, whose build the parent takes
    #: from that folder once the builder has ended.
    memory_scratch: bool = True
    #: Memory a sandboxed worker may hold in all, bytes (0: no limit): its processes, the
    #: memory files they write, its scratch and /dev/shm memory file systems; enforced by
    #: a cgroup of its own where the machine gives one (``cgroups.py``).
    group_memory_bytes: int = 0
    #: Memory all sandboxed workers of the zygote may hold together, bytes (0: no limit):
    #: the limit of their groups' common parent (``cgroups.Tree``).
    workers_memory_bytes: int = 0


def settings_from_config(config: Any, device: str, scratch_root: Path, **more: Any) -> SandboxSettings:
    """The sandbox settings the eval section ``config`` gives workers on ``device`` (their
    memory, address-space and file-size limits, threads, TF32), with ``more`` fields; the
    evaluator, module validation and the problem audit start their zygotes with them."""
    return SandboxSettings(
        scratch_root=scratch_root,
        address_space_bytes=int(config.memory_limit_gb * (1 << 30)),
        group_memory_bytes=worker_memory_bytes(config, device),
        workers_memory_bytes=workers_memory_bytes(config),
        file_size_bytes=int(config.file_size_limit_mb) << 20,
        threads=1 if device == "cpu" else 4,
        tf32=bool(config.reference_tf32),
        device_init_bytes=max(0, int(config.device_init_mb)) << 20,
        **more,
    )


def worker_memory_bytes(config: Any, device: str) -> int:
    """What ``config`` (the eval section) gives each sandboxed worker's cgroup as its memory
    limit on ``device``, bytes (0: none); see ``EvalConfig.worker_memory_gb``."""
    gigabytes = float(config.worker_memory_gb)
    if gigabytes < 0:
        return 0
    if gigabytes == 0:
        if device == "cpu" and float(config.memory_limit_gb) > 0:
            gigabytes = float(config.memory_limit_gb) + 2.0
        else:
            return machine_memory_bytes() // 2
    return int(gigabytes * (1 << 30))


def workers_memory_bytes(config: Any) -> int:
    """What ``config`` (the eval section) lets all sandboxed workers of one evaluator hold
    together, bytes (0: no limit); see ``EvalConfig.workers_memory_gb``. Each worker's own
    limit bounds one worker; several candidates of a batch (a GRPO group is written by one
    policy) each under it could still together take the machine's memory, and the kernel's
    OOM killer would then choose among all its processes, kz's own included."""
    gigabytes = float(getattr(config, "workers_memory_gb", 0.0))
    if gigabytes < 0:
        return 0
    if gigabytes == 0:
        total = machine_memory_bytes()
        return max(0, total - min(total // 4, 16 << 30))
    return int(gigabytes * (1 << 30))


def machine_memory_bytes() -> int:
    """The machine's memory, bytes (``MemTotal``; 0 where it cannot be read)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 0


def scrubbed_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The parent's environment reduced to :data:`ENV_ALLOWLIST` and what the backends let
    through (``BackendInfo.passthrough``), minus secret-looking names."""
    from kz_core.plugins import backends

    allowed = ENV_ALLOWLIST | {name for info in backends().values() for name in info.passthrough}
    env = {k: v for k, v in os.environ.items() if (k in allowed or k.startswith("LC_")) and not SECRET_NAME.search(k)}
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


#: How long killing a worker waits for it to exit (as for a worker started directly).
KILL_WAIT_S = 10.0
#: Roles whose workers are forked fresh by the zygote for each candidate.
SANDBOXED_ROLES = frozenset({"candidate", "executor"})
#: Roles of ``BackendInfo.environment``.
ENVIRONMENT_ROLES = frozenset({"candidate", "executor", "sealed_executor", "reference", "trusted"})


def executor_caches() -> tuple[str, ...]:
    """Shared folders, under the user's cache, that executors (never candidates) write:
    what the registered backends declare (``BackendInfo.shared_caches``)."""
    from kz_core.plugins import backends

    return tuple(dict.fromkeys(name for info in backends().values() for name in info.shared_caches))


def backend_environment(role: str, scratch: Path | str, cache: Path | str) -> dict[str, str]:
    """What the registered backends give a worker of ``role`` (``BackendInfo.environment``),
    with ``{scratch}`` and ``{cache}`` filled in."""
    from kz_core.plugins import backends

    values = {}
    for info in backends().values():
        for entry_role, variable, template in info.environment:
            if entry_role == role:
                values[variable] = template.format(scratch=str(scratch), cache=str(cache))
    return values


def device_environment(device: str) -> dict[str, str]:
    """Variables every process on ``device`` needs: on a CPU, no GPU, and what the
    registered backends ask for there (``BackendInfo.cpu_environment``: Triton's interpreter)."""
    if device != "cpu":
        return {}
    from kz_core.plugins import backends

    env = {"CUDA_VISIBLE_DEVICES": ""}
    for info in backends().values():
        env.update(info.cpu_environment)
    return env


def _new_uid() -> int:
    """An unprivileged uid for one candidate (far above any account's)."""
    return (1 << 30) + secrets.randbelow(1 << 29)


def _spawn(module_args: list[str], child_sock: socket.socket, env: dict[str, str], cwd: Path, log: WorkerLog) -> subprocess.Popen:
    """``python -m`` a kz module in its own session, handing it ``child_sock`` (closed here)
    and ``log`` as its output."""
    try:
        return subprocess.Popen(
            [sys.executable, "-m", *module_args],
            pass_fds=[child_sock.fileno()],
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log.fd,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        child_sock.close()


class WorkerLog:
    """A worker's log file (its stdout and stderr), created here and read through the
    descriptor this process opened when it created it, never through its path.

    A candidate's log lies in its scratch folder, which it may change at will: it replaced
    ``worker.log`` by a link to ``/proc/self/environ`` (this process's environment, tokens
    included, came back in the finding of its crash), to a key file, to ``/dev/zero`` (the
    read never ended) or by a FIFO (the open never returned; red-team round 26b). The
    descriptor keeps the file this process made, whatever is at the path now, and only its
    last bytes are read. The path is handed to the zygote, which opens it (appending) for
    the worker before any candidate code runs.
    """

    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)

    def tail(self, size: int) -> str:
        """At most the last ``size`` bytes, decoded; "" when closed or unreadable."""
        if self.fd is None or size <= 0:
            return ""
        try:
            end = os.fstat(self.fd).st_size
            start = max(0, end - size)
            data = b""
            while len(data) < end - start:  # a regular file: short reads only near its end
                chunk = os.pread(self.fd, end - start - len(data), start + len(data))
                if not chunk:
                    break
                data += chunk
        except OSError:
            return ""
        return data.decode("utf-8", errors="replace")

    def close(self) -> None:
        """Idempotent; a long run keeps no descriptor per worker."""
        fd, self.fd = self.fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


#: How a worker's end reads when the kernel ended it for the workers' common memory limit
#: (``eval.workers_memory_gb``), not its own: the evaluator evaluates that candidate once
#: more, alone, since its neighbours' memory may have been the cause.
SHARED_LIMIT_ENDED = "kz's sandboxed workers together went over their memory limit"
#: A worker ended by the kernel whose peak stayed below this share of its own limit was
#: ended for the common one.
OWN_LIMIT_SHARE = 0.9


class ZygoteProcess:
    """The zygote of one evaluator and device (``kz_core/evaluate/zygote.py``), parent side.

    Started once; imports torch, Triton and the plugins; forks every sandboxed worker.
    """

    def __init__(self, device: str, settings: SandboxSettings):
        self.device = device
        self.settings = settings
        make_scratch_root(settings.scratch_root)
        self.log = WorkerLog(Path(os.path.realpath(settings.scratch_root)) / f"zygote-{secrets.token_hex(4)}.log")
        self.log_path = self.log.path
        parent_sock, child_sock = socket.socketpair()
        self.sock = parent_sock
        self._lock = threading.Lock()
        env = scrubbed_environment({**dict(settings.extra_env), **device_environment(device)})
        # One thread per library in the zygote: a process with threads cannot fork safely.
        env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
        env["HOME"] = str(settings.scratch_root)
        env[MARKER_VARIABLE] = f"{SESSION_MARKER}-zygote-{secrets.token_hex(4)}"  # its workers replace it with theirs
        try:
            argv = ["kz_core.evaluate.zygote", str(child_sock.fileno()), device, str(int(settings.workers_memory_bytes))]
            self.process = _spawn(argv, child_sock, env, settings.scratch_root, self.log)
        except BaseException:
            self.log.close()
            with contextlib.suppress(OSError):
                self.sock.close()
            raise
        try:
            self.sock.settimeout(settings.start_timeout_s)
            hello = self._recv()
        except (OSError, ValueError, WireError_) as exc:
            tail = self._log_tail()
            self.close()
            raise WorkerStartError(f"the sandbox's zygote on {device} did not start: {exc}\n{tail}") from exc
        if not hello.get("ok"):
            self.close()
            raise WorkerStartError(f"the sandbox's zygote on {device} did not start: {hello.get('message')}\n{hello.get('traceback', '')}")
        from kz_core.evaluate.isolation import Support

        self.support = Support(**hello["isolation"])

    def _log_tail(self) -> str:
        return self.log.tail(2000)

    def _recv(self) -> dict[str, Any]:
        import json

        header = _recv_all(self.sock, 8)
        size = int.from_bytes(header, "big")
        return json.loads(_recv_all(self.sock, size))

    def _request(self, message: dict[str, Any], fds: list[int] = (), timeout: float = 60.0) -> dict[str, Any]:
        import json

        payload = json.dumps(message).encode()
        with self._lock:
            self.sock.settimeout(timeout)
            data = len(payload).to_bytes(8, "big") + payload
            socket.send_fds(self.sock, [data[:8]], list(fds))
            self.sock.sendall(data[8:])
            return self._recv()

    def fork(self, spec: dict[str, Any], worker_socket: socket.socket) -> tuple[int, int]:
        """Fork a worker that serves ``worker_socket``: ``(supervisor pid, worker pid)``."""
        try:
            reply = self._request({"op": "fork", "spec": spec}, [worker_socket.fileno()])
        except (OSError, ValueError) as exc:
            raise WorkerStartError(f"the zygote on {self.device} did not answer: {exc}\n{self._log_tail()}") from exc
        if not reply.get("ok"):
            raise WorkerStartError(reply.get("message", "the zygote could not fork a worker"))
        return int(reply["pid"]), int(reply["worker_pid"])

    def exit_status(self, pid: int) -> int | None:
        """How a supervisor ended (its worker's status; 128+N for signal N), None if running."""
        return self.ended(pid).get("exit")

    def ended(self, pid: int) -> dict[str, Any]:
        """What the zygote knows of a supervisor: ``exit`` (as :meth:`exit_status`, None
        while it runs) and, once it has ended in a cgroup of its own, ``oom_kills`` (its
        processes the kernel ended for going over the group's memory limit) and
        ``memory_peak`` (bytes)."""
        try:
            reply = self._request({"op": "status", "pid": pid}, timeout=10.0)
        except (OSError, ValueError, WireError_):
            return {}
        return reply if isinstance(reply, dict) else {}

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        self.log.close()


def start_zygote(device: str, settings: SandboxSettings, isolation_off: Any = ()) -> ZygoteProcess:
    """A zygote for ``settings`` whose support has the ``isolation_off`` mechanisms turned
    off (``eval.isolation_off``). If the names are unknown or the zygote cannot start, the
    scratch folder goes too: nothing is left behind.

    :raises ConfigError: an unknown mechanism (``eval.isolation_off: unknown ...``).
    :raises WorkerStartError: the zygote did not start.
    """
    from kz_core.config import ConfigError
    from kz_core.evaluate.isolation import Support

    try:
        try:
            Support().without(isolation_off)
        except ValueError as exc:
            raise ConfigError(f"eval.isolation_off: {exc}") from exc
        zygote = ZygoteProcess(device, settings)
    except BaseException:
        _remove_tree(settings.scratch_root)
        raise
    zygote.support = zygote.support.without(isolation_off)
    return zygote


class WireError_(Exception):
    """A zygote message that cannot be read."""


def _recv_all(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise WireError_("connection closed")
        data += chunk
    return data


#: A candidate worker's ``oom_score_adj``: the kernel's OOM killer adds it (in thousandths
#: of the memory it may choose from) to a process's share of that memory, so every process
#: of a candidate comes before any of kz's, and the one holding the most before the others.
#: A process may raise its own score, never lower it again without ``CAP_SYS_RESOURCE``.
OOM_SCORE_ADJ_CANDIDATE = 1000
#: A reference worker's, an executor's and a builder's: after any candidate's that holds
#: memory of its own, unless they hold half of what the killer chooses from.
OOM_SCORE_ADJ_SERVICE = 500


def sandbox_spec(role: str, device: str, scratch: Path, log: Path, env: dict[str, str], settings: SandboxSettings, support: Any) -> dict[str, Any]:
    """What the zygote's supervisor does to place a worker of ``role`` (see zygote.py)."""
    from kz_core.evaluate import isolation

    candidate = role == "candidate"
    # /dev/shm: torch's CUDA IPC keeps the reference count of a shared GPU tensor there
    # and CUDA its IPC events (executors share outputs with reference workers; so do
    # candidate workers of backends without trusted kernels); Python's multiprocessing
    # keeps its semaphores there. In namespaces each worker has a /dev/shm of its own (a
    # memory file system, isolation.mount_private_shm), writable on every device.
    # Without, the machine's is writable only on a GPU, which needs it: a file left there
    # outlives the run and takes the machine's memory (it is a tmpfs).
    private_shm = bool(support.pid_namespace and support.private_shm)
    write = [str(scratch), *(["/dev/shm"] if private_shm or device.startswith("cuda") else [])]
    if role == "executor":
        write += list(settings.executor_write_paths)
    return {
        "role": role,
        "scratch": str(scratch),
        "log": str(log),
        "env": env,
        # Every sandboxed role gets its namespaces: a reference worker and an executor run
        # a problem's code (which the Proposer may have written), so what they start dies
        # with them and they cannot see or signal other processes either.
        "namespaces": bool(support.pid_namespace),
        "private_shm": private_shm,
        # A sandboxed worker's scratch folder is a memory file system of its own where
        # /dev/shm can be one (what it writes cannot fill the machine's disk; it is charged
        # to its cgroup): a candidate's of 1 GiB, a reference worker's or an executor's of
        # 4 GiB (Inductor's cache of a compile baseline lies there). Not a builder's, whose
        # build the parent reads after it.
        "scratch_bytes": (isolation.SCRATCH_BYTES if candidate else isolation.SERVICE_SCRATCH_BYTES) if private_shm and settings.memory_scratch else 0,
        "isolate_uid": _new_uid() if candidate and support.separate_uid else None,
        # Whom the kernel's OOM killer ends first when memory runs out (the workers' common
        # cgroup limit, or the machine's where there are no cgroups): a candidate's worker,
        # then a reference worker, an executor or a builder, never kz itself before them.
        "oom_score_adj": OOM_SCORE_ADJ_CANDIDATE if candidate else OOM_SCORE_ADJ_SERVICE,
        # A cgroup of its own (cgroups.py), named after its scratch folder: all its
        # processes' memory and their number bounded as a whole. A candidate's processes
        # are its limit; a reference worker's, an executor's and a builder's (torch's
        # compile workers, a compiler's jobs) four times as many.
        "cgroup": {
            "name": scratch.name,
            "memory_bytes": settings.group_memory_bytes if "memory" in support.cgroups else 0,
            "tasks": (settings.processes if candidate else 4 * settings.processes) if "pids" in support.cgroups else 0,
        }
        if support.cgroups
        else None,
        "landlock": support.landlock_abi > 0,
        "seccomp": bool(support.seccomp),
        "read_paths": isolation.system_read_paths() + [str(scratch), *settings.read_paths],
        "write_paths": write,
        "device_paths": isolation.device_files(),
        "lookup_paths": list(settings.lookup_paths),
        "limits": {
            "address_space_bytes": settings.address_space_bytes if device == "cpu" else 0,
            "file_size_bytes": settings.file_size_bytes,
            "open_files": settings.open_files,
            "processes": settings.processes,
        },
    }


class WorkerProcess:
    """One worker and the socket to it.

    :param zygote: fork the worker from this zygote (sandboxed roles); None: start a
        trusted worker as a new Python process.
    """

    def __init__(self, device: str, role: str, settings: SandboxSettings, zygote: ZygoteProcess | None = None):
        self.device = device
        self.role = role
        self.settings = settings
        self.marker = f"{SESSION_MARKER}-{secrets.token_hex(8)}"
        self.uses = 0
        self.retired = False
        #: The key this worker is bound to (``WorkerPool.acquire(key)``), if any.
        self.binding: str | None = None
        #: Where peak GPU memory per request is recorded (set by the pool), if anywhere.
        self.contention: Any = None
        #: The content hash of the last problem a request named (diagnostics: peaks are
        #: recorded in footprints of it).
        self.problem_hash: str | None = None
        #: The sealed file of the last reply's large tensors, while they are mapped (wire.SealedReply).
        self.reply_file: wire.SealedReply | None = None
        self.zygote = zygote
        self.worker_pid = 0
        self._worker_handle: _ProcessHandle | None = None
        make_scratch_root(settings.scratch_root)
        self.scratch = Path(os.path.realpath(settings.scratch_root)) / f"{role}-{self.marker}"
        self.scratch.mkdir(mode=0o700)
        self.log = WorkerLog(self.scratch / "worker.log")
        self.log_path = self.log.path
        parent_sock, child_sock = socket.socketpair()
        self.sock = parent_sock
        env = scrubbed_environment({**dict(settings.extra_env), **device_environment(device)})
        env[MARKER_VARIABLE] = self.marker
        env["HOME"] = str(self.scratch)
        env["TMPDIR"] = str(self.scratch)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.setdefault("OMP_NUM_THREADS", str(settings.threads))
        # What the backends give each role (their kernel caches: Triton's, for one).
        # Nothing a candidate compiles may reach a cache that another process reads; it
        # may read what executors compiled (BackendInfo.shared_caches).
        kind = role if role in ("candidate", "executor") else "reference" if zygote is not None else "trusted"
        for variable, value in backend_environment(kind, self.scratch, cache_dir()).items():
            if kind == "trusted":
                env.setdefault(variable, value)
            else:
                env[variable] = value
        if role == "candidate":
            env["KZ_CACHE_DIR"] = str(self.scratch / "cache")
            # Builds shared between candidates, made by kz's trusted builder: read here, and
            # a missing one is deferred to the builder (kz_core/evaluate/builds.py).
            from kz_core.evaluate import builds

            env[builds.SHARED_ENV] = str(cache_dir() / builds.FOLDER)
            env[builds.DEFER_ENV] = "1"
        elif role == "executor":
            env["KZ_CACHE_DIR"] = str(cache_dir())
            from kz_core.evaluate import builds

            env[builds.SHARED_ENV] = str(cache_dir() / builds.FOLDER)  # read there (kernels of shared builds)
        elif zygote is not None:  # a sandboxed reference worker: caches of its own
            env["KZ_CACHE_DIR"] = str(self.scratch / "cache")
            env["TORCHINDUCTOR_CACHE_DIR"] = str(self.scratch / "inductor-cache")
        else:
            env.setdefault("KZ_CACHE_DIR", str(cache_dir()))
        try:
            if zygote is not None:
                spec = sandbox_spec(role, device, self.scratch, self.log_path, env, settings, zygote.support)
                if spec["isolate_uid"] is not None:
                    make_scratch_root(settings.scratch_root, searchable=True)
                try:
                    pid, self.worker_pid = zygote.fork(spec, child_sock)
                finally:
                    child_sock.close()
                self.process: Any = _ForkedProcess(pid, zygote)
                self._worker_handle = _ProcessHandle(self.worker_pid)
            else:
                self.process = _spawn(["kz_core.evaluate.worker", str(child_sock.fileno())], child_sock, env, self.scratch, self.log)
                self.worker_pid = self.process.pid
        except BaseException:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.discard_scratch()
            raise
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
            "device_init_bytes": settings.device_init_bytes,
        }
        try:
            hello = self.call({"op": "init", **init}, timeout=settings.start_timeout_s, _raw_init=True)
        except WorkerError as exc:
            self.kill()
            self.discard_scratch()
            raise WorkerStartError(f"a {role} worker on {device} did not start: {exc}") from exc
        if not hello.get("ok"):
            self.kill()
            self.discard_scratch()
            raise WorkerStartError(f"a {role} worker on {device} did not start: {hello.get('message')}\n{hello.get('traceback', '')}")
        self.identity: dict[str, Any] = hello["identity"]
        logger.debug("started {} worker pid {} on {}", role, self.process.pid, device)

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_tail(self, size: int = 3000) -> str:
        """The last ``size`` bytes of the worker's output, read through this process's own
        descriptor of its log (:class:`WorkerLog`), never through the path in its scratch
        folder."""
        return self.log.tail(size)

    def discard_scratch(self) -> None:
        """The worker is done with: its log's descriptor is closed and its scratch folder
        removed (:func:`_remove_tree`, which never raises)."""
        self.log.close()
        _remove_tree(self.scratch)

    def describe_exit(self) -> str:
        code = self.process.poll()
        if code is None:
            return "the worker stopped answering"
        if getattr(self.process, "oom_kills", 0):
            own = self.settings.group_memory_bytes
            peak = int(getattr(self.process, "memory_peak", 0) or 0)
            if self.settings.workers_memory_bytes and (not own or 0 < peak < own * OWN_LIMIT_SHARE):
                return (
                    f"{SHARED_LIMIT_ENDED} ({self.settings.workers_memory_bytes / (1 << 30):.3g} GiB; eval.workers_memory_gb):"
                    f" the kernel ended this worker, which held {peak / (1 << 30):.3g} GiB, among the most of them"
                )
            return (
                f"the worker went over its memory limit ({own / (1 << 30):.3g} GiB for all its processes, the memory files they"
                " wrote and its memory file systems; eval.worker_memory_gb) and the kernel ended it"
            )
        if code < 0:
            return f"the worker was killed by {_signal_name(code)}"
        if isinstance(self.process, _ForkedProcess) and code > 128:
            return f"the worker was killed by {_signal_name(128 - code)}"
        return f"the worker process exited with status {code} before replying"

    def call(self, request: dict[str, Any], timeout: float, _raw_init: bool = False, files: tuple[wire.SealedReply, ...] = ()) -> dict[str, Any]:
        """Send one request and wait at most ``timeout`` seconds for the reply. ``files``:
        sealed files of earlier replies whose bytes the request's tensors may be passed by
        (``wire.send_request``); :attr:`reply_file` is this reply's, when it has one."""
        if self.retired:
            raise WorkerDied("this worker was retired")
        deadline = time.monotonic() + timeout
        sent = time.perf_counter()
        problem = request.get("problem")
        if isinstance(problem, dict) and isinstance(problem.get("hash"), str):
            self.problem_hash = problem["hash"]
        # Memory for the reply's large tensors, which the worker copies into it (wire.LentFile)
        lent = wire.LentFile.create(self.settings.max_reply_bytes)
        try:
            self.sock.settimeout(timeout)
            wire.send_request(self.sock, request, lent, files)
            self.sock.settimeout(max(0.001, deadline - time.monotonic()))
            reply = wire.recv_reply(self.sock, self.settings.max_reply_bytes, lent=lent)
            self.reply_file = lent.kept if lent is not None else None
        except (TimeoutError, socket.timeout) as exc:
            self.kill()
            raise WorkerTimeout(f"no reply within {timeout:g} s; the worker's process group was killed") from exc
        except (wire.WireError, ConnectionError, OSError) as exc:
            # Give the process a moment to be reaped so that its exit status is known.
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=2)
            reason = self.describe_exit()
            if isinstance(exc, wire.WireError) and self.process.poll() is None:
                reason = "the worker's reply was refused"  # it still runs: what it sent is the fault
            self.kill()
            raise WorkerDied(f"{reason} ({exc})") from exc
        finally:
            if lent is not None:
                lent.close()
        if not isinstance(reply, dict):
            self.kill()
            raise WorkerDied(f"the worker sent a malformed reply of type {type(reply).__name__}")
        peak = reply.get("peak_bytes")
        if self.contention is not None:  # diagnostics only, never a verdict
            self.contention.record_request(f"{self.role} {request.get('op')}", time.perf_counter() - sent)
            phases = reply.get("phases")  # what the request's time was spent on, as the worker says
            if isinstance(phases, dict) and len(phases) <= 16:
                for phase, seconds in phases.items():
                    if isinstance(phase, str) and type(seconds) is float and 0 <= seconds < 1e6:
                        self.contention.record_request(f"{self.role} {request.get('op')}: {phase[:40]}", seconds)
            if type(peak) is int:
                self.contention.record_peak(f"{self.role} {request.get('op')}", peak, self.problem_hash)
        return reply

    def kill(self, *, record: bool = True) -> None:
        """Kill the worker and everything it started; idempotent. ``record``: count the
        wait for its exit in the request times (``<role> kill``; not for a worker that
        was asked to exit and had the time to)."""
        first, started = record and not self.retired, time.perf_counter()
        self.retired = True
        if isinstance(self.process, _ForkedProcess):
            # The worker first (in its own PID namespace, that ends every process in it),
            # then its supervisor, which kills whatever is left below it.
            if self._worker_handle is not None:
                self._worker_handle.send(signal.SIGKILL)
                # Until it has exited: its GPU memory is not yet the driver's again (the
                # caller gives the candidate's reservation back next; on an H200 a burst
                # of candidates ran out of memory with no reservation held) and its
                # kernels may still run beside the next one's timing.
                self._worker_handle.wait_gone(KILL_WAIT_S)
                self._worker_handle.close()
            self.process.terminate()
        else:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=KILL_WAIT_S)
            kill_marked_processes(self.marker)
        with contextlib.suppress(OSError):
            self.sock.close()
        if first and self.contention is not None:  # diagnostics only: what waiting for the exit costs
            self.contention.record_request(f"{self.role} kill", time.perf_counter() - started)

    def shutdown(self) -> None:
        """Ask the worker to exit, then make sure it and its children are gone."""
        self.ask_to_exit()
        self.finish_exit()

    def ask_to_exit(self) -> None:
        """Send the worker its ``shutdown`` request (it exits on its own, with its CUDA
        context: about a second on a GPU); :meth:`finish_exit` waits for it."""
        if not self.retired:
            with contextlib.suppress(OSError, wire.WireError):
                self.sock.settimeout(2)
                wire.send_request(self.sock, {"op": "shutdown"})

    def finish_exit(self) -> None:
        """Wait a little for a worker asked to exit, then make sure it and its children
        are gone and its scratch folder with them."""
        if not self.retired:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)
        self.kill(record=False)
        self.discard_scratch()


class _ProcessHandle:
    """A process that is not this one's child, held by a pidfd opened while it is known to
    be alive (just after the zygote reports it): a signal sent through it reaches that
    process or none, never another that was given its number after it ended (process ids
    are reused, within minutes on a busy machine with 32768 of them). Where the kernel has
    no pidfds (before Linux 5.3), the signal goes by number as before."""

    def __init__(self, pid: int):
        self.pid = pid
        self.fd: int | None = None
        self.by_number = False
        try:
            self.fd = os.pidfd_open(pid)
        except ProcessLookupError:
            pass  # already gone: nothing to signal, ever
        except (AttributeError, OSError):
            self.by_number = True

    def send(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if self.fd is not None:
                signal.pidfd_send_signal(self.fd, signum)
            elif self.by_number:
                os.kill(self.pid, signum)

    def wait_gone(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds for the process to exit (its pidfd turns
        readable once it has: its files are closed, a GPU's memory among them); whether it
        did. Without a pidfd, nothing is waited for."""
        if self.fd is None:
            return not self.by_number
        import select

        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        return bool(poller.poll(int(timeout * 1000)))

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
        self.fd, self.by_number = None, False


class _ForkedProcess:
    """A supervisor forked by the zygote, as much of ``subprocess.Popen`` as workers use."""

    def __init__(self, pid: int, zygote: ZygoteProcess):
        self.pid = pid
        self.zygote = zygote
        self.returncode: int | None = None
        #: Processes of the worker's cgroup that the kernel ended for a memory limit.
        self.oom_kills = 0
        #: The most memory its cgroup held, bytes (0: unknown).
        self.memory_peak = 0
        self.handle = _ProcessHandle(pid)

    def poll(self) -> int | None:
        if self.returncode is None:
            ended = self.zygote.ended(self.pid)
            code = ended.get("exit")
            self.returncode = code if type(code) is int else None
            if self.returncode is not None:
                oom, peak = ended.get("oom_kills"), ended.get("memory_peak")
                self.oom_kills = oom if type(oom) is int else 0
                self.memory_peak = peak if type(peak) is int else 0
                self.handle.close()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = time.monotonic() + (timeout if timeout is not None else 1e9)
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("worker", timeout or 0)
            time.sleep(0.02)
        return self.returncode  # type: ignore[return-value]

    def terminate(self) -> None:
        """SIGTERM (the supervisor kills everything below it, then exits); once only: the
        handle is closed after it, so that a long run holds no descriptor per worker."""
        self.handle.send(signal.SIGTERM)
        self.handle.close()


def _remove_tree(path: Path) -> None:
    """Remove a scratch folder that a candidate may have made hostile (a tree thousands of
    folders deep, folders it may not enter, links out of it); never raises: a worker's
    slot in its pool is given back whatever is left (``paths.remove_tree``)."""
    remove_tree(path)


def make_scratch_root(path: Path, searchable: bool = False) -> None:
    """Create ``path``, the folder every worker's scratch folder is made in, with mode
    ``0o700``: nothing a candidate leaves there (a setuid copy of a shell, red-team round
    26b) is reachable by another local user, even if it outlived its removal. With
    ``searchable``, others may pass through it (``0o711``; never list it): a candidate that
    runs as a uid of its own must reach its own folder below it, whose name (a random
    marker) nobody else can guess. A folder that exists is only ever given that search
    permission, never narrowed: another zygote's candidates may need it. (A candidate
    that shares kz's uid could change this mode itself: what keeps its files from
    outliving the run is :func:`_remove_tree`, which removes them whatever they are.)"""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    if searchable:
        info = os.stat(path, follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and info.st_mode & 0o011 != 0o011:
            os.chmod(path, stat.S_IMODE(info.st_mode) | 0o011)


class WorkerPool:
    """Up to ``size`` workers of one role on one device, started on demand.

    :param zygote: fork workers from it (sandboxed roles); the pool keeps started workers
        ready so that a candidate does not wait for one.
    :param single_use: kill a worker after one use (default: when forked from a zygote).
        A pool that keeps its workers can bind each to a key (``acquire(key)``): a worker
        that served one key never serves another (reference workers, one problem each).
    """

    def __init__(
        self,
        device: str,
        role: str,
        size: int,
        settings: SandboxSettings,
        recycle_after: int = 0,
        zygote: ZygoteProcess | None = None,
        single_use: bool | None = None,
        spares: int = 1,
    ):
        self.device = device
        self.role = role
        self.size = max(1, size)
        self.settings = settings
        self.zygote = zygote
        #: Kill a worker after one use (the default for forked, sandboxed workers).
        self.single_use = zygote is not None if single_use is None else single_use
        self.recycle_after = 1 if self.single_use else recycle_after
        self._idle: queue.LifoQueue[WorkerProcess] = queue.LifoQueue()
        self._live = 0
        self._lock = threading.Lock()
        self._closed = False
        self._starting: list[threading.Thread] = []
        #: Every worker this pool started and has not yet seen killed (closed at close()).
        self._workers: set[WorkerProcess] = set()
        self.started = 0
        self.identity: dict[str, Any] | None = None
        #: Where worker starts are recorded (``kz_core.evaluate.contention``), when set.
        self.contention: Any = None
        #: Keys whose workers are needed again soon (a candidate of that problem is in
        #: flight): their idle workers are ended to make room only when no other is idle.
        self._pins: collections.Counter[str] = collections.Counter()
        #: Unbound workers a keyed pool keeps started ahead of new keys (:meth:`_spare`),
        #: and how many of them are starting now.
        self.spares = max(1, spares)
        self._spares_starting = 0

    @contextlib.contextmanager
    def pinned(self, key: str) -> Iterator[None]:
        """While the block runs, ``key``'s idle worker is the last to be ended to make
        room for another key or a spare. On an H200, eight candidates of eight problems
        in flight and a spare started ahead did not fit eight slots: the least recently
        used idle worker, bound to a problem still being evaluated, was ended and started
        again for its next comparison (161 reference worker starts for 71 candidates)."""
        with self._lock:
            self._pins[key] += 1
        try:
            yield
        finally:
            with self._lock:
                self._pins[key] -= 1
                if self._pins[key] <= 0:
                    del self._pins[key]

    def _start(self) -> WorkerProcess:
        started = time.perf_counter()
        try:
            worker = WorkerProcess(self.device, self.role, self.settings, self.zygote)
        except BaseException:
            with self._lock:
                self._live -= 1
            raise
        worker.contention = self.contention
        if self.contention is not None:
            self.contention.record(f"{self.role} start", 0.0, time.perf_counter() - started)
        with self._lock:
            self.started += 1
            self.identity = self.identity or worker.identity
            self._workers = {w for w in self._workers if not w.retired} | {worker}
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
    def acquire(self, key: str | None = None, prefer: int | None = None) -> Iterator[WorkerProcess]:
        """A worker for exclusive use; retired workers are replaced on the next acquire.

        :param key: serve only with a worker that never served another key: an idle worker
            bound to ``key`` or a fresh one; when the pool is full, an idle worker bound to
            another key is ended to make room.
        :param prefer: with ``key``, the pid of the worker to serve with when it is idle
            among those bound to ``key`` (one that holds something of the key's already).
        """
        if self._closed:
            raise WorkerError("the pool is closed")
        worker = self._take(key, prefer=prefer)
        while worker is ...:
            time.sleep(0.05)
            worker = self._take(key, wait=0.45, prefer=prefer)
        if worker is None:
            worker = self._start()
        if key is not None and worker.binding is None:
            self._spare()  # the next new key finds a started worker
        worker.binding = worker.binding if key is None else key
        try:
            yield worker
        finally:
            worker.uses += 1
            gone = True
            try:
                if self.single_use and not worker.retired:
                    worker.kill()  # it ran a candidate: never reused
                elif self.recycle_after and worker.uses >= self.recycle_after and not worker.retired:
                    worker.shutdown()
                gone = worker.retired or self._closed
                if gone:
                    if not worker.retired:
                        worker.shutdown()
                    else:
                        worker.discard_scratch()
            finally:
                # The slot is given back whatever happened above: with one worker, a
                # removal that raised left the pool waiting forever (red-team round 26b).
                if gone:
                    self._replace()
                else:
                    self._idle.put(worker)

    def _take(self, key: str | None, wait: float = 0.0, prefer: int | None = None) -> Any:
        """An idle worker that may serve ``key`` (``prefer``: see :meth:`acquire`); None:
        start one (counted); ``...``: wait."""
        if key is None:
            with self._lock:
                try:
                    return self._idle.get_nowait()
                except queue.Empty:
                    if self._live < self.size:
                        self._live += 1
                        return None
            if not wait:
                return ...
            try:
                return self._idle.get(timeout=wait)
            except queue.Empty:
                return ...
        with self._lock:
            idle = []
            while True:
                try:
                    idle.append(self._idle.get_nowait())
                except queue.Empty:
                    break
            bound = sorted((w for w in idle if w.binding == key), key=lambda w: w.worker_pid != prefer)
            chosen = next(iter(bound), None) or next((w for w in idle if w.binding is None), None)
            evicted = None
            if chosen is None and self._live >= self.size and idle:
                # The least recently returned (the queue is last in, first out) of those no
                # candidate in flight needs, else of all: a new key always makes progress.
                unpinned = [w for w in idle if w.binding not in self._pins]
                evicted = unpinned[-1] if unpinned else idle[-1]
            for worker in reversed(idle):
                if worker is not chosen and worker is not evicted:
                    self._idle.put(worker)
            if chosen is not None:
                return chosen
            if evicted is None and self._live >= self.size:
                return ...
            self._live += 1 if evicted is None else 0
        if evicted is not None:
            evicted.shutdown()  # served another key: its slot goes to a fresh worker
        return None

    def _spare(self) -> None:
        """A keyed pool just bound an unbound worker: start unbound ones in the background
        until ``spares`` are idle or starting, each in a free slot or in place of the least
        recently used idle worker, so that a new key does not wait for a worker to start (a
        GPU worker's start creates a CUDA context and loads the checks' kernels: about 4 s
        on a busy H200, while a new problem came every 3 s)."""
        for _ in range(self.spares):
            if not self._one_spare():
                return

    def _one_spare(self) -> bool:
        """Start one spare if fewer than ``spares`` are idle or starting; whether it did."""
        with self._lock, self._idle.mutex:
            idle = list(self._idle.queue)  # last in, first out: the first is the oldest
            if self._closed or sum(w.binding is None for w in idle) + self._spares_starting >= self.spares:
                return False
            evicted = None
            if self._live >= self.size:
                # Only an idle worker that no candidate in flight needs makes room for a
                # spare: a spare is worth less than a worker that would be started again.
                unpinned = [w for w in idle if w.binding not in self._pins and w.binding is not None]
                if not unpinned:
                    return False
                evicted = unpinned[0]
                self._idle.queue.remove(evicted)
            else:
                self._live += 1
            self._spares_starting += 1
        if evicted is not None:
            evicted.shutdown()
        with self._lock:
            self._start_in_background("spare")
        return True

    def shed_idle(self) -> int:
        """End every idle worker (spares too) and free its slot, so that its CUDA context
        (about 0.6 GB on an H100) goes back to the driver; workers in use are left alone
        and the next acquire starts one as before. Returns how many were ended."""
        with self._lock, self._idle.mutex:
            idle = list(self._idle.queue)
            self._idle.queue.clear()
            self._live -= len(idle)
        for worker in idle:  # asked side by side, as at close()
            worker.ask_to_exit()
        for worker in idle:
            worker.finish_exit()
        return len(idle)

    def _replace(self) -> None:
        """A worker left the pool: start its replacement in the background."""
        with self._lock:
            if self._closed:
                self._live -= 1
                return
            self._start_in_background("replacement")

    def _start_in_background(self, purpose: str) -> None:
        """Start a worker (already counted in ``_live``) in a thread that puts it in the
        idle queue; the caller holds ``_lock``. A failed start is logged: the next acquire
        starts one itself."""

        def start() -> None:
            worker = None
            try:
                worker = self._start()
            except BaseException as exc:  # noqa: BLE001 - the next acquire starts one again
                if not self._closed:
                    logger.warning("could not start a {} {} worker on {}: {}", purpose, self.role, self.device, exc)
            if worker is not None:
                self._idle.put(worker)
            if purpose == "spare":  # counted as starting until it is idle: never in neither place
                with self._lock:
                    self._spares_starting -= 1

        thread = threading.Thread(target=start, daemon=True)
        self._starting = [t for t in self._starting if t.is_alive()] + [thread]
        thread.start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            starting = list(self._starting)
        for thread in starting:
            thread.join()
        idle = []
        while True:
            try:
                idle.append(self._idle.get_nowait())
            except queue.Empty:
                break
        # Every worker asked first, then each waited for: they exit side by side. One by
        # one (a second each on a GPU), an H200 evaluator of two dozen workers was still
        # closing 35 s after its last result.
        for worker in idle:
            worker.ask_to_exit()
        for worker in idle:
            worker.finish_exit()
        with self._lock:
            left = [w for w in self._workers if not w.retired]
        for worker in left:  # in use by a caller that did not give it back: end it anyway
            worker.kill()
            worker.log.close()  # its folder goes with the scratch root
