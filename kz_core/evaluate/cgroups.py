"""A control group of its own per sandboxed worker: its memory and its process count are
bounded for the worker as a whole, children, memory files and memory file systems included.

Per-process limits do not bound a worker (red-team round 26d): ``RLIMIT_AS`` counts mapped
memory only, so pages written into ``memfd_create`` files or into the worker's scratch and
``/dev/shm`` memory file systems are nobody's, each forked child has a limit of its own,
and ``RLIMIT_NPROC`` does not bind a user mapped to the host's root. A cgroup charges all
of them: with its ``memory`` controller, a worker that goes over its limit is ended by the
kernel (its OOM killer acts inside the group only), and with ``pids``, a fork or thread
past the limit fails in the worker, never on the rest of the machine.

Where the groups are: under the cgroup of the process that runs kz, never above it (that
would take workers out from under the limits and device rules set on kz's group), in each
hierarchy that has the controller (cgroup v1, a hierarchy per controller) or in the unified
one (v2, where the controllers must be enabled for kz's own group's children, which v2
allows only for the root group or a delegated group holding no process). The zygote
makes a folder ``kz-<its pid>`` there (:class:`Tree`); each worker's supervisor makes one
below it named after the worker, sets
its limits and moves itself in before it forks anything (:meth:`Tree.enter`), so that the
namespace's init, the worker and all they start are in it; once the supervisor has ended,
the zygote kills whatever is left in the group, reads whether the kernel's OOM killer
acted there, and removes it (:meth:`Tree.release`).

A candidate cannot leave its group or raise its limits: the files are the host root's,
outside what Landlock lets it write, and in its user namespace it holds no capability over
them. What a machine does not give (no cgroup file system, one mounted read-only as in a
container without privileges, a v2 group without delegated controllers, kz not root) is
detected by :func:`probe` and reported with the other isolation gaps.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import sys
import time
from pathlib import Path

import attrs

#: The controllers kz uses.
CONTROLLERS = ("memory", "pids")
#: The prefix of the folders kz makes in a cgroup hierarchy.
PREFIX = "kz-"
#: Tasks (processes and threads) a worker's group holds beyond its candidate's own limit:
#: its supervisor, the user-mapping helper and the PID namespace's init.
OVERHEAD_TASKS = 8


@attrs.frozen
class Place:
    """Where one controller's groups are made: the calling process's own group.

    :ivar version: 1 (a hierarchy of its own) or 2 (the unified hierarchy).
    :ivar path: that group's folder.
    """

    controller: str
    version: int
    path: Path


def _unescape(field: str) -> str:
    """A path field of ``/proc/self/mountinfo`` (spaces and such are octal escapes)."""
    out, index = [], 0
    while index < len(field):
        if field[index] == "\\" and index + 3 < len(field) and field[index + 1 : index + 4].isdigit():
            out.append(chr(int(field[index + 1 : index + 4], 8)))
            index += 4
        else:
            out.append(field[index])
            index += 1
    return "".join(out)


def _mounts(text: str) -> list[tuple[str, str, str, set[str]]]:
    """``(mount point, root in the hierarchy, file system type, super options)`` of every
    cgroup file system in ``text`` (``/proc/self/mountinfo``)."""
    found = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        dash = fields.index("-")
        if dash < 5 or len(fields) < dash + 4:
            continue
        fstype = fields[dash + 1]
        if fstype in ("cgroup", "cgroup2"):
            options = set(fields[dash + 3].split(","))
            found.append((_unescape(fields[4]), _unescape(fields[3]), fstype, options))
    return found


def _own_groups(text: str) -> dict[str, str]:
    """The calling process's group per v1 controller, and ``""`` for the unified hierarchy,
    from ``text`` (``/proc/self/cgroup``)."""
    groups: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if not controllers:
            groups[""] = path
        for controller in controllers.split(","):
            if controller:
                groups[controller] = path
    return groups


def _beneath(point: str, root: str, path: str) -> Path | None:
    """The folder of group ``path`` in a hierarchy mounted at ``point`` whose root is
    ``root``; None if the mount does not show it."""
    root = root.rstrip("/")
    if path != root and not path.startswith(root + "/"):
        return None
    return Path(point + path[len(root) :])


def places(mountinfo: str | None = None, cgroup: str | None = None) -> dict[str, Place]:
    """Where this process's groups of each of :data:`CONTROLLERS` are (v1 first: a
    controller bound to a v1 hierarchy is not in the unified one)."""
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text() if mountinfo is None else mountinfo
        cgroup = Path("/proc/self/cgroup").read_text() if cgroup is None else cgroup
    except OSError:
        return {}
    own = _own_groups(cgroup)
    found: dict[str, Place] = {}
    unified: tuple[str, str] | None = None
    for point, root, fstype, options in _mounts(mountinfo):
        if fstype == "cgroup2":
            unified = unified or (point, root)
            continue
        for controller in CONTROLLERS:
            if controller in options and controller in own and controller not in found:
                folder = _beneath(point, root, own[controller])
                if folder is not None:
                    found[controller] = Place(controller, 1, folder)
    if unified is not None and "" in own:
        # Only kz's own group, never one above it: a group made higher up would take the
        # workers out from under every rule set between there and kz's group (a
        # container's memory limit, its device filter). v2 lets a group with processes
        # in it give its children no controller (but the root), so where kz's group is
        # not the root, or one delegated with no process of kz's in it, none are found.
        folder = _beneath(*unified, own[""])
        if folder is not None:
            try:
                enabled = (folder / "cgroup.subtree_control").read_text().split()
            except OSError:
                enabled = []
            for controller in CONTROLLERS:
                if controller not in found and controller in enabled:
                    found[controller] = Place(controller, 2, folder)
    return found


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _limit_files(place: Place) -> list[str]:
    if place.controller == "memory":
        return ["memory.limit_in_bytes"] if place.version == 1 else ["memory.max"]
    return ["pids.max"]


def probe(found: dict[str, Place] | None = None) -> tuple[str, ...]:
    """The controllers of :data:`CONTROLLERS` under which this process can make a group,
    set its limit and move a process into it: for each, a group is made, a forked child
    joins it and exits, and the group is removed. What a supervisor does for each worker
    (:meth:`Tree.enter`) is thus known to work before any worker depends on it."""
    found = places() if found is None else found
    usable = []
    for controller, place in found.items():
        folder = place.path / f"{PREFIX}probe-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            folder.mkdir()
        except OSError:
            continue
        try:
            for name in _limit_files(place):
                _write(folder / name, str(1 << 30) if place.controller == "memory" else "64")
            if _join_in_child(folder):
                usable.append(controller)
        except OSError:
            continue
        finally:
            for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)  # the child is still leaving it
    return tuple(c for c in CONTROLLERS if c in usable)


def _join_in_child(folder: Path) -> bool:
    """Whether a forked child can move itself into the group ``folder``."""
    from kz_core.evaluate.isolation import _probe_child  # isolation imports this module

    def join() -> bool:
        _write(folder / "cgroup.procs", str(os.getpid()))
        return True

    return _probe_child(join)


@attrs.frozen
class Released:
    """How a worker's group ended (:meth:`Tree.release`).

    :ivar removed: its folders are gone (else the zygote tries again later).
    :ivar oom_kills: processes the kernel's OOM killer ended in it (its memory limit).
    :ivar memory_peak: the most memory it held, bytes (0: unknown).
    """

    removed: bool
    oom_kills: int = 0
    memory_peak: int = 0


def _counter(path: Path, key: str) -> int:
    """The value of ``key`` in a ``key value`` file (``memory.events``, ``memory.oom_control``)."""
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    return 0


class Tree:
    """The zygote's groups: a folder ``kz-<pid>`` in each hierarchy of :data:`CONTROLLERS`
    that :func:`probe` found usable, and a group per worker beneath it.

    :param controllers: those to use (``Support.cgroups``); none: the tree does nothing.
    :param memory_bytes: what all the workers' groups may hold together, the limit of the
        ``kz-<pid>`` folder itself (0: none; ``eval.workers_memory_gb``). Past it the
        kernel's OOM killer acts among the workers only, choosing by its usual score (the
        memory a process holds, plus its ``oom_score_adj``: a candidate's worker first).
    """

    def __init__(self, controllers: tuple[str, ...] | list[str], memory_bytes: int = 0):
        self.places = {c: p for c, p in places().items() if c in controllers}
        self.roots: dict[str, Path] = {}
        #: The workers' common limit in force (0: none).
        self.memory_bytes = 0
        for controller, place in self.places.items():
            root = place.path / f"{PREFIX}{os.getpid()}"
            _remove_stale(place.path)
            with contextlib.suppress(FileExistsError):
                root.mkdir()
            if place.version == 2:
                _write(root / "cgroup.subtree_control", f"+{controller}")
            self.roots[controller] = root
            if controller == "memory" and memory_bytes > 0:
                try:
                    _limit_memory(root, place.version, memory_bytes)
                    self.memory_bytes = int(memory_bytes)
                except OSError as exc:  # each worker's own limit still binds
                    print(f"kz: the workers' common memory limit could not be set on {root}: {exc}", file=sys.stderr, flush=True)

    def _folders(self, name: str) -> dict[str, Path]:
        return {controller: root / name for controller, root in self.roots.items()}

    def enter(self, name: str, memory_bytes: int, tasks: int) -> None:
        """In a worker's supervisor, before it forks anything: make the worker's group
        ``name``, limit it to ``memory_bytes`` (0: no limit) and ``tasks`` processes and
        threads (0: no limit; :data:`OVERHEAD_TASKS` are added for the supervisor's own),
        and move this process into it."""
        folders = self._folders(name)
        for controller, folder in folders.items():
            with contextlib.suppress(FileExistsError):
                folder.mkdir()
            version = self.places[controller].version
            if controller == "memory" and memory_bytes > 0:
                _limit_memory(folder, version, memory_bytes)
            if controller == "pids" and tasks > 0:
                _write(folder / "pids.max", str(tasks + OVERHEAD_TASKS))
        for folder in dict.fromkeys(folders.values()):
            _write(folder / "cgroup.procs", str(os.getpid()))

    def release(self, name: str) -> Released:
        """In the zygote, once a worker's supervisor has ended: SIGKILL whatever is left in
        its group, read what the memory controller saw, and remove the group."""
        folders = self._folders(name)
        oom_kills = peak = 0
        memory = folders.get("memory")
        if memory is not None:
            if self.places["memory"].version == 1:
                oom_kills = _counter(memory / "memory.oom_control", "oom_kill")
                with contextlib.suppress(OSError, ValueError):
                    peak = int((memory / "memory.max_usage_in_bytes").read_text())
            else:
                oom_kills = _counter(memory / "memory.events", "oom_kill")
                with contextlib.suppress(OSError, ValueError):
                    peak = int((memory / "memory.peak").read_text())
        if memory is not None and memory.is_dir():
            if _kill_members(memory):
                _wait_empty(memory)
            # Reclaim what is still charged to it (the page cache of files it wrote): a
            # removed group holding charges lingers in the kernel, and a long sweep would run
            # out of memory cgroup ids (65,535) with thousands of them.
            with contextlib.suppress(OSError):
                if self.places["memory"].version == 1:
                    _write(memory / "memory.force_empty", "0")
                else:
                    _write(memory / "memory.reclaim", str(1 << 40))
        removed = True
        for folder in dict.fromkeys(folders.values()):
            removed = _remove_group(folder) and removed
        return Released(removed, oom_kills, peak)

    def close(self) -> None:
        """Remove the tree's own folders (the zygote's exit; groups still busy stay)."""
        for root in dict.fromkeys(self.roots.values()):
            with contextlib.suppress(OSError):
                _remove_group(root)


def _limit_memory(folder: Path, version: int, memory_bytes: int) -> None:
    """Limit the group ``folder`` to ``memory_bytes`` of memory, swap included where the
    kernel accounts it (v2: no swap at all)."""
    if version == 1:
        _write(folder / "memory.limit_in_bytes", str(memory_bytes))
        # Memory and swap together, where swap is accounted: pages pushed out to swap
        # count as well. Not every kernel accounts it.
        with contextlib.suppress(OSError):
            _write(folder / "memory.memsw.limit_in_bytes", str(memory_bytes))
    else:
        _write(folder / "memory.max", str(memory_bytes))
        with contextlib.suppress(OSError):
            _write(folder / "memory.swap.max", "0")


def _kill_members(folder: Path) -> bool:
    """SIGKILL every process in the group ``folder`` (``cgroup.kill`` where the kernel has
    it); whether any was there."""
    kill = folder / "cgroup.kill"
    try:
        members = [int(pid) for pid in (folder / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return False
    if not members:
        return False
    if kill.exists():
        with contextlib.suppress(OSError):
            _write(kill, "1")
            return True
    for pid in members:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return True


def _wait_empty(folder: Path) -> None:
    """Wait at most half a second for the killed processes of ``folder`` to be gone (they
    are within milliseconds; a group still busy is removed later)."""
    for _ in range(50):
        time.sleep(0.01)
        with contextlib.suppress(OSError):
            if not (folder / "cgroup.procs").read_text().strip():
                return


def _remove_group(folder: Path) -> bool:
    """Remove the group ``folder`` and any below it, killing what is left in them first;
    whether it is gone. A group whose processes are still exiting stays (EBUSY)."""
    if not folder.is_dir():
        return True
    for child in [c for c in folder.iterdir() if c.is_dir()]:
        _remove_group(child)
    if _kill_members(folder):
        _wait_empty(folder)
    try:
        folder.rmdir()
    except FileNotFoundError:
        return True
    except OSError as exc:
        if exc.errno in (errno.EBUSY, errno.ENOTEMPTY):
            return False
        raise
    return True


def _remove_stale(parent: Path) -> None:
    """Remove the groups that zygotes which are no longer running left under ``parent``
    (a zygote killed before it could remove its own), and whatever is left in them."""
    with contextlib.suppress(OSError):
        for folder in parent.iterdir():
            tail = folder.name[len(PREFIX) :]
            if not folder.name.startswith(PREFIX) or not tail.isdigit() or not folder.is_dir():
                continue
            if int(tail) != os.getpid() and Path(f"/proc/{tail}").exists():
                continue
            with contextlib.suppress(OSError):
                _remove_group(folder)
