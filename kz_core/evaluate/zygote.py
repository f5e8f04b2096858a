"""The zygote: a trusted process that imported torch, Triton and the kz plugins once, and
forks a fresh worker for every request, so that nothing of one candidate survives into
another and a new worker starts in milliseconds instead of seconds.

Started by ``kz_core/evaluate/sandbox.py`` as ``python -m kz_core.evaluate.zygote FD``.
It never initialises CUDA (a process that did cannot fork usefully) and never runs
candidate code. For each ``fork`` request it receives the new worker's socket (passed as
a file descriptor) and forks a *supervisor*, which:

1. redirects its output to the worker's log file and replaces its environment;
2. where the machine gives cgroups, makes the worker's group, limits its memory and
   processes, and moves itself in (``cgroups.Tree.enter``), so that all that follows is
   bounded as a whole;
3. for a sandboxed worker, enters new user, PID, mount, network and IPC namespaces
   (``isolation.enter_namespaces``) and forks PID 1 of the new PID namespace, which forks
   the worker with the supervisor's own process id (unique on the machine) and stays as
   the namespace's init; otherwise forks the worker and stays its subreaper, so that
   orphans come back to it and die with it;
4. reports the pid of the worker (or of the namespace's init, whose death ends it) to the
   zygote and waits for it.

The worker applies resource limits, Landlock and seccomp to itself, then serves requests
(``kz_core/evaluate/worker.py``). Killing the worker kills its namespace; a supervisor
that receives SIGTERM kills every process below it first. The zygote reaps supervisors
and remembers how they ended (with a cgroup: whether the kernel ended a process of it for
its memory limit, after which it kills what is left in the group and removes it); when its
parent goes away it kills them all and exits.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import sys
import traceback
from pathlib import Path
from typing import Any

_LENGTH = struct.Struct(">Q")


def _preload(device: str) -> None:
    """Import what every worker needs, before any fork (nothing here touches CUDA): torch,
    kz, the plugins, and the modules each backend names (``BackendInfo.preload``)."""
    import numpy  # noqa: F401
    import torch
    import torch.utils._python_dispatch  # noqa: F401

    import kz_core.evaluate.worker  # noqa: F401
    from kz_core.evaluate import isolation
    from kz_core.plugins import get_plugin_manager

    get_plugin_manager()
    # A recorded call imports a part of torch (its dispatch-mode machinery) the first
    # time: once here, on the CPU, instead of in every forked worker. It no longer imports
    # torch._dynamo (recording.without_dynamo_import): 2.4 s of every zygote's start on a
    # small CPU. On a GPU the zygote imports it all the same, once per evaluator, since
    # whether any GPU path of a worker needs it is not measured.
    from kz_core.evaluate.recording import Recorder

    sample = torch.ones(4)
    recorder = Recorder([sample], 1 << 20)
    recorder.plan(recorder.call(lambda x: torch.empty_like(x).copy_(x), [sample]))
    if device != "cpu":
        import torch._dynamo  # noqa: F401

        try:  # the checks' Triton kernels (their JIT functions; compiled in the workers)
            import kz_core.evaluate.device_checks  # noqa: F401
        except ImportError:
            pass
    isolation.support()  # probes in forked children; cached for every worker
    if torch.cuda.is_initialized():
        raise RuntimeError("CUDA was initialised while preloading: workers forked from here could not use it")
    from kz_core.plugins import backends

    for name in dict.fromkeys(name for info in backends().values() for name in info.preload):
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - an optional library: the workers import it if they need it
            pass
    if torch.cuda.is_initialized():
        raise RuntimeError("a backend's preload initialised CUDA: workers forked from here could not use it")


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    import json

    payload = json.dumps(message).encode()
    sock.sendall(_LENGTH.pack(len(payload)) + payload)


def _recv(sock: socket.socket) -> tuple[dict[str, Any], list[int]]:
    import json

    header, fds, _, _ = socket.recv_fds(sock, _LENGTH.size, 4)
    if len(header) < _LENGTH.size:
        if not header:
            raise EOFError
        header += sock.recv(_LENGTH.size - len(header), socket.MSG_WAITALL)
    (size,) = _LENGTH.unpack(header)
    payload = b""
    while len(payload) < size:
        chunk = sock.recv(size - len(payload))
        if not chunk:
            raise EOFError
        payload += chunk
    return json.loads(payload), list(fds)


def _kill_descendants(root: int) -> None:
    """SIGKILL every process below ``root`` (children and their children, found in /proc)."""
    while True:
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").glob("[0-9]*"):
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                children.setdefault(int(fields[1]), []).append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
        below, pending = [], list(children.get(root, []))
        while pending:
            pid = pending.pop()
            below.append(pid)
            pending += children.get(pid, [])
        if not below:
            return
        for pid in below:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in below:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def _run_worker(worker_sock: socket.socket, spec: dict[str, Any]) -> None:
    """In the worker process: restrict it, then serve requests. Never returns."""
    from kz_core.evaluate import isolation, worker

    code = 0
    try:
        limits = spec.get("limits", {})
        isolation.apply_limits(
            address_space_bytes=limits.get("address_space_bytes", 0),
            file_size_bytes=limits.get("file_size_bytes", 0),
            open_files=limits.get("open_files", 0),
            processes=limits.get("processes", 0) if spec.get("namespaces") and spec.get("isolate_uid") is not None else 0,
        )
        os.chdir(spec["scratch"])
        if spec.get("landlock"):
            # CUDA names its threads (/proc/self/task/N/comm) and fails to start without it.
            own_tasks = f"/proc/{os.getpid()}/task"
            isolation.apply_landlock(spec["read_paths"], [*spec["write_paths"], own_tasks], spec["device_paths"], spec.get("lookup_paths", ()))
        if spec.get("seccomp"):
            isolation.install_seccomp(candidate=spec.get("role") == "candidate")
        worker.serve(worker_sock, preapplied_limits=True, sandbox=spec)
    except BaseException:  # noqa: BLE001 - the parent reads the log and sees the socket close
        traceback.print_exc()
        code = 70
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _supervise(worker_sock: socket.socket, spec: dict[str, Any], report: int, tree: Any = None) -> None:
    """In the supervisor: place the worker (in its cgroup, with ``tree``), report its pid,
    wait for it. Never returns."""
    from kz_core.evaluate import isolation

    code = 1
    try:
        os.setsid()
        isolation.set_parent_death_signal()
        log = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.environ.clear()
        os.environ.update(spec["env"])
        import tempfile

        tempfile.tempdir = None  # computed again from TMPDIR (the zygote's was cached)
        adjust = spec.get("oom_score_adj")
        if type(adjust) is int:
            # Raised before anything is forked (the worker and its children inherit it); a
            # /proc mounted read-only leaves it as it was, the OOM killer's usual order.
            try:
                with open("/proc/self/oom_score_adj", "w") as score:
                    score.write(str(adjust))
            except OSError:
                pass
        group = spec.get("cgroup")
        if group and tree is not None:
            # Before anything is forked: the helper, the init, the worker and all they start
            # are in the worker's group, bounded as a whole (cgroups.py).
            tree.enter(str(group["name"]), int(group.get("memory_bytes", 0)), int(group.get("tasks", 0)))
        if spec.get("namespaces"):
            worker = isolation.enter_namespaces(
                spec.get("isolate_uid"), Path(spec["scratch"]), private_shm=bool(spec.get("private_shm")), scratch_bytes=int(spec.get("scratch_bytes", 0))
            )
        else:
            isolation.become_subreaper()
            worker = os.fork()
            if worker == 0:
                isolation.set_parent_death_signal()
        if worker == 0:
            os.close(report)
            _run_worker(worker_sock, spec)
        worker_sock.close()
        os.write(report, str(worker).encode())
        os.close(report)

        namespaced = bool(spec.get("namespaces"))
        reaped = False

        def stop(signum: int, frame: Any) -> None:
            if namespaced:
                # The init's death ends its namespace. Never walk /proc here: the init
                # mounted its namespace's /proc, which this process shares, and the
                # numbers there are not this process's (killing by them hit others).
                if not reaped:
                    os.kill(worker, signal.SIGKILL)
            else:
                _kill_descendants(os.getpid())
            os._exit(128 + signum)

        signal.signal(signal.SIGTERM, stop)
        _, status = os.waitpid(worker, 0)
        reaped = True
        code = os.waitstatus_to_exitcode(status)
        code = 128 - code if code < 0 else code
        if not namespaced:
            _kill_descendants(os.getpid())  # what the worker left behind
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
        code = 71
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


class Zygote:
    """The zygote's state: its supervisors and how the finished ones ended."""

    def __init__(self, control: socket.socket, tree: Any = None):
        self.control = control
        self.tree = tree
        self.live: set[int] = set()
        self.ended: dict[int, int] = {}
        #: The cgroup of each live supervisor, by its pid; how those of ended ones ended;
        #: those whose processes were still exiting when their supervisor was reaped.
        self.groups: dict[int, str] = {}
        self.released: dict[int, Any] = {}
        self.pending: set[str] = set()

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            self.live.discard(pid)
            self.ended[pid] = os.waitstatus_to_exitcode(status)
            name = self.groups.pop(pid, None)
            if name is not None and self.tree is not None:
                released = self.tree.release(name)
                self.released[pid] = released
                if not released.removed:
                    self.pending.add(name)
            if len(self.ended) > 4096:
                gone = next(iter(self.ended))
                self.ended.pop(gone)
                self.released.pop(gone, None)
        for name in list(self.pending):
            if self.tree.release(name).removed:
                self.pending.discard(name)

    def status(self, pid: int) -> dict[str, Any]:
        """How supervisor ``pid`` is: running, or how it ended (and what its cgroup saw).
        A live one is running whatever an earlier process of that id left behind."""
        running = pid in self.live
        reply: dict[str, Any] = {"ok": True, "running": running, "exit": None if running else self.ended.get(pid)}
        released = None if running else self.released.get(pid)
        if released is not None:
            reply.update(oom_kills=released.oom_kills, memory_peak=released.memory_peak)
        return reply

    def fork(self, spec: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            return {"ok": False, "message": "a fork request carries exactly one socket"}
        worker_sock = socket.socket(fileno=fds[0])
        read, write = os.pipe()
        group = spec.get("cgroup") if self.tree is not None else None
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the supervisor
            os.close(read)
            self.control.close()
            _supervise(worker_sock, spec, write, self.tree if group else None)
        os.close(write)
        worker_sock.close()
        # A process id comes back once its process has gone (at thousands a second, if a
        # candidate churns them): what an earlier supervisor of this id left is not this one's.
        self.ended.pop(pid, None)
        self.released.pop(pid, None)
        self.live.add(pid)
        if group:
            self.groups[pid] = str(group["name"])
        answer = b""
        while True:
            chunk = os.read(read, 64)
            if not chunk:
                break
            answer += chunk
        os.close(read)
        if not answer:
            self.reap()
            return {"ok": False, "pid": pid, "message": f"the worker's supervisor ended before starting it (see {spec['log']})"}
        return {"ok": True, "pid": pid, "worker_pid": int(answer)}

    def serve(self) -> None:
        while True:
            self.reap()
            try:
                request, fds = _recv(self.control)
            except (EOFError, OSError, ValueError):
                break
            op = request.get("op")
            if op == "fork":
                reply = self.fork(request["spec"], fds)
            elif op == "status":
                self.reap()
                reply = self.status(int(request.get("pid", 0)))
            elif op == "shutdown":
                break
            else:
                reply = {"ok": False, "message": f"unknown op {op!r}"}
            try:
                _send(self.control, reply)
            except OSError:
                break
        for pid in list(self.live):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for pid in list(self.live):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                continue
            self.live.discard(pid)
            name = self.groups.pop(pid, None)
            if name is not None:
                self.pending.add(name)
        if self.tree is not None:
            for name in self.pending:
                self.tree.release(name)
            self.tree.close()


def main() -> None:
    control = socket.socket(fileno=int(sys.argv[1]))
    device = sys.argv[2] if len(sys.argv) > 2 else "cpu"
    workers_memory = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    try:
        _preload(device)
    except BaseException as exc:  # noqa: BLE001 - say why, the parent reports it
        _send(control, {"ok": False, "message": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()})
        os._exit(1)
    import attrs

    from kz_core.evaluate import cgroups, isolation

    support = isolation.support()
    tree = None
    if support.cgroups:
        try:
            tree = cgroups.Tree(support.cgroups, memory_bytes=workers_memory)
            support = attrs.evolve(support, workers_memory_bytes=tree.memory_bytes)  # what was set, said in results
        except OSError:
            traceback.print_exc()
            support = support.without(["cgroups"])  # said in what kz reports of the sandbox
    _send(control, {"ok": True, "pid": os.getpid(), "isolation": attrs.asdict(support)})
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    Zygote(control, tree).serve()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
