"""Operating-system isolation of the processes that run candidate code.

The kernel's own mechanisms, applied by a freshly forked child to itself before any
candidate code runs (``kz_core/evaluate/zygote.py``):

- **namespaces**: a user namespace (ids mapped to an unprivileged user of its own when kz
  runs as root), a PID namespace (the candidate's process and the namespace's init: it
  cannot see or signal other processes, and everything it starts dies with it; it has a
  process id no other sandboxed process has), a mount namespace with a fresh
  ``/proc`` and a private ``/dev/shm`` (a memory file system of its own: POSIX shared
  memory, torch's CUDA IPC reference counts and CUDA's IPC events of one worker are
  nobody else's), a network namespace (no interfaces) and an IPC namespace (no System V
  shared memory with anyone);
- **Landlock**: the filesystem is read-only except the child's scratch folder (and the
  device files CUDA needs); the journal, caches and run folders are not even readable;
  signals and abstract Unix sockets cannot leave the sandbox (ABI 6);
  TCP bind and connect are refused (ABI 4);
- **seccomp**: a filter that refuses ptrace, reading or writing other processes' memory,
  System V IPC, new namespaces, mounts, keyrings, BPF, io_uring and kernel modules; every
  new socket and every connect() (a Unix socket by path is reachable otherwise), datagram
  socket pairs and sendto() to an address; setuid and setgid modes, and extended
  attributes (file capabilities);
- **resource limits** per process and a scrubbed environment (``sandbox.py``).

What a machine's kernel lacks is detected (:func:`support`) and reported by ``kz plugins``,
``kz eval`` and every result, never silently skipped. Nothing here runs candidate code;
this module only restricts the process that calls it. Linux only: elsewhere every
mechanism reports as unavailable.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import platform
import resource
import struct
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs

from kz_core.evaluate import cgroups

# -- constants from the kernel's UAPI headers ---------------------------------------------

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUTS = 0x04000000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_CLONE_NEWCGROUP = 0x02000000
_NAMESPACE_FLAGS = _CLONE_NEWNS | _CLONE_NEWUTS | _CLONE_NEWIPC | _CLONE_NEWUSER | _CLONE_NEWPID | _CLONE_NEWNET | _CLONE_NEWCGROUP

_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_DUMPABLE = 4
_PR_SET_SECCOMP = 22
_PR_SET_CHILD_SUBREAPER = 36
_SECCOMP_MODE_FILTER = 2

_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
#: The size of the memory file system mounted over ``/dev/shm`` in a worker's namespace:
#: room for CUDA's IPC events, torch's IPC reference counts and Python's semaphores.
PRIVATE_SHM_BYTES = 64 << 20
#: The most a candidate worker's scratch folder may hold (a memory file system of its own
#: over the folder, in its mount namespace): on the disk kz's files are on, with no quota,
#: a candidate made 4 GiB of real blocks in 7 ms (red-team round 26c), and a full disk
#: fails the journal's and its neighbours' writes.
SCRATCH_BYTES = 1 << 30
#: The same for a reference worker's or an executor's scratch folder: a problem's code runs
#: in the one (the Proposer's, in co-evolution) and a candidate's replayed plan in the
#: other, and Inductor's cache of a compile baseline lies there.
SERVICE_SCRATCH_BYTES = 4 << 30

# Landlock (include/uapi/linux/landlock.h); system call numbers are the same on every
# architecture (the "generic" table).
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1

FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5
_NET_BIND_TCP = 1 << 0  # ABI 4
_NET_CONNECT_TCP = 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
_SCOPE_SIGNAL = 1 << 1

#: What a read-only path allows.
READ_ACCESS = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
#: What a lookup-only folder allows: its files open by name, no folder beneath it listed.
LOOKUP_ACCESS = FS_EXECUTE | FS_READ_FILE
#: What a writable folder allows (everything but device nodes).
WRITE_ACCESS = (
    READ_ACCESS | FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_DIR | FS_MAKE_REG | FS_MAKE_SOCK
    | FS_MAKE_FIFO | FS_MAKE_SYM | FS_REFER | FS_TRUNCATE
)
#: A device file that is opened for writing (``/dev/null``, ``/dev/nvidia0``).
DEVICE_ACCESS = FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE


def _fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    return rights  # FS_IOCTL_DEV is left unhandled: CUDA talks to its devices by ioctl


# seccomp (include/uapi/linux/seccomp.h, filter.h, audit.h)
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_ERRNO = 0x00050000
_SECCOMP_RET_KILL_PROCESS = 0x80000000
_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_JGE_K = 0x35
_BPF_JSET_K = 0x45
_BPF_ALU_AND_K = 0x54
_BPF_RET_K = 0x06
_X32_SYSCALL_BIT = 0x40000000

#: System calls refused by the sandbox's filter, by name, with the reason.
DENIED_SYSCALLS: dict[str, str] = {
    "ptrace": "tracing or rewriting another process",
    "process_vm_readv": "reading another process's memory",
    "process_vm_writev": "writing another process's memory",
    "pidfd_getfd": "taking another process's file descriptors",
    "kcmp": "comparing other processes' resources",
    "process_madvise": "acting on another process's memory",
    "shmget": "System V shared memory", "shmat": "System V shared memory",
    "shmctl": "System V shared memory", "shmdt": "System V shared memory",
    "semget": "System V semaphores", "semop": "System V semaphores",
    "semctl": "System V semaphores", "semtimedop": "System V semaphores",
    "msgget": "System V message queues", "msgsnd": "System V message queues",
    "msgrcv": "System V message queues", "msgctl": "System V message queues",
    "unshare": "new namespaces", "setns": "joining namespaces",
    "mount": "mounting", "umount2": "unmounting", "pivot_root": "changing the root", "chroot": "changing the root",
    "open_tree": "mounting", "move_mount": "mounting", "fsopen": "mounting", "fsmount": "mounting",
    "fspick": "mounting", "fsconfig": "mounting", "mount_setattr": "mounting",  # round 26c: fspick gave a descriptor
    "keyctl": "kernel keyrings", "add_key": "kernel keyrings", "request_key": "kernel keyrings",
    "bpf": "BPF programs", "perf_event_open": "performance counters of other processes",
    "userfaultfd": "userfaultfd", "io_uring_setup": "io_uring", "io_uring_enter": "io_uring",
    "io_uring_register": "io_uring", "init_module": "kernel modules", "finit_module": "kernel modules",
    "delete_module": "kernel modules", "kexec_load": "kexec", "kexec_file_load": "kexec", "reboot": "reboot",
    "swapon": "swap", "swapoff": "swap", "acct": "process accounting", "settimeofday": "the clock",
    "clock_settime": "the clock", "clock_adjtime": "the clock", "adjtimex": "the clock", "syslog": "the kernel log",
    "open_by_handle_at": "opening files by handle", "name_to_handle_at": "file handles",
    "fanotify_init": "filesystem notifications of others", "quotactl": "quotas",
    "migrate_pages": "another process's pages", "move_pages": "another process's pages",
    "iopl": "I/O ports", "ioperm": "I/O ports",
    # Landlock (ABI 7 and before) does not govern connect() to a Unix socket by its path,
    # nor does the network namespace: docker.sock, D-Bus, journald, Ray's sockets. No
    # sandboxed process connects to anything (red-team round 26b).
    "connect": "connecting to Unix sockets by path",
}

#: Refused for candidate workers only (red-team round 27): epoll's watches and inotify's
#: instances and watches are counted per user, with no exemption for root, and a candidate
#: whose user is the host's root (kz as root, a shared uid) took all of them, so that every
#: root process on the host got ENOSPC from epoll_ctl and EMFILE from inotify_init for as
#: long as it ran. No kernel, Triton or CUDA code needs them (libcuda's threads and Python's
#: subprocess and multiprocessing poll()); reference workers and executors, which run
#: torch's compile workers, keep them, their inotify bounded by their namespace's limits.
CANDIDATE_DENIED_SYSCALLS: dict[str, str] = {
    "epoll_create": "epoll (its watches are counted per user, host root included)",
    "epoll_create1": "epoll (its watches are counted per user, host root included)",
    "inotify_init": "inotify (its instances are counted per user, host root included)",
    "inotify_init1": "inotify (its instances are counted per user, host root included)",
}

_SYSCALLS = {
    "x86_64": {
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438, "kcmp": 312,
        "process_madvise": 440, "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67, "semget": 64, "semop": 65,
        "semctl": 66, "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71, "unshare": 272,
        "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "open_tree": 428,
        "move_mount": 429, "fsopen": 430, "fsmount": 432, "fsconfig": 431, "fspick": 433, "mount_setattr": 442, "keyctl": 250, "add_key": 248, "request_key": 249,
        "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "init_module": 175, "finit_module": 313, "delete_module": 176, "kexec_load": 246,
        "kexec_file_load": 320, "reboot": 169, "swapon": 167, "swapoff": 168, "acct": 163, "settimeofday": 164,
        "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159, "syslog": 103, "open_by_handle_at": 304,
        "name_to_handle_at": 303, "fanotify_init": 300, "quotactl": 179, "migrate_pages": 256, "move_pages": 279,
        "iopl": 172, "ioperm": 173, "epoll_create": 213, "epoll_create1": 291, "inotify_init": 253, "inotify_init1": 294,
        # not denied outright: filtered on their arguments
        "clone": 56, "clone3": 435, "prctl": 157, "socket": 41, "connect": 42, "sendto": 44, "socketpair": 53,
        "chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452, "open": 2, "creat": 85, "openat": 257,
        "mknod": 133, "mknodat": 259, "openat2": 437, "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190,
        "setxattrat": 463,
    },
    "aarch64": {
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_getfd": 438, "kcmp": 272,
        "process_madvise": 440, "shmget": 194, "shmat": 196, "shmctl": 195, "shmdt": 197, "semget": 190, "semop": 193,
        "semctl": 191, "semtimedop": 192, "msgget": 186, "msgsnd": 189, "msgrcv": 188, "msgctl": 187, "unshare": 97,
        "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "open_tree": 428,
        "move_mount": 429, "fsopen": 430, "fsmount": 432, "fsconfig": 431, "fspick": 433, "mount_setattr": 442, "keyctl": 219, "add_key": 217, "request_key": 218,
        "bpf": 280, "perf_event_open": 241, "userfaultfd": 282, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "init_module": 105, "finit_module": 273, "delete_module": 106, "kexec_load": 104,
        "kexec_file_load": 294, "reboot": 142, "swapon": 224, "swapoff": 225, "acct": 89, "settimeofday": 170,
        "clock_settime": 112, "clock_adjtime": 266, "adjtimex": 171, "syslog": 116, "open_by_handle_at": 265,
        "name_to_handle_at": 264, "fanotify_init": 262, "quotactl": 60, "migrate_pages": 238, "move_pages": 239,
        "epoll_create1": 20, "inotify_init1": 26,
        "clone": 220, "clone3": 435, "prctl": 167, "socket": 198, "connect": 203, "sendto": 206, "socketpair": 199,
        "fchmod": 52, "fchmodat": 53, "fchmodat2": 452, "openat": 56, "mknodat": 33, "openat2": 437,
        "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "setxattrat": 463,
    },
}
_AF_UNIX = 1
_SOCK_STREAM = 1
_SOCK_SEQPACKET = 5
_SOCK_TYPE_MASK = 0xF  # what is left of socket types without SOCK_NONBLOCK and SOCK_CLOEXEC
_S_ISUID_ISGID = 0o6000
_O_CREAT_OR_TMPFILE = 0o100 | 0o20000000  # O_CREAT | __O_TMPFILE (the same on x86-64 and aarch64)
#: Where a system call's mode is: (index of its mode argument, index of its open flags or
#: None). A mode with the setuid or setgid bit is refused (with open flags: when they create).
_MODE_ARGUMENTS = {
    "chmod": (1, None), "fchmod": (1, None), "fchmodat": (2, None), "fchmodat2": (2, None),
    "mknod": (1, None), "mknodat": (2, None), "open": (2, 1), "creat": (1, None), "openat": (3, 2),
}


#: The mechanisms ``eval.isolation_off`` may name.
MECHANISMS = ("landlock", "seccomp", "namespaces", "private_shm", "cgroups")


class IsolationError(RuntimeError):
    """A mechanism that :func:`support` reported as available failed to apply."""


@attrs.frozen
class Support:
    """What this machine's kernel lets kz use to isolate candidate processes.

    :ivar landlock_abi: the Landlock ABI version (0: none). 1 restricts files, 4 adds TCP,
        6 adds signal and abstract-socket scoping.
    :ivar seccomp: seccomp filters can be installed.
    :ivar user_namespace: a child can create a user namespace (and, inside it, the others).
    :ivar pid_namespace: a child can be PID 1 of a PID namespace of its own.
    :ivar proc_mount: a fresh ``/proc`` can be mounted in that namespace.
    :ivar private_shm: a memory file system of the worker's own can be mounted over
        ``/dev/shm`` in that namespace (else, on a GPU, workers share the machine's).
    :ivar separate_uid: each candidate runs as an unprivileged user of its own (kz runs as
        root, so it can map one).
    :ivar cgroups: the controllers (``memory``, ``pids``) under which each sandboxed
        worker gets a control group of its own (``kz_core/evaluate/cgroups.py``): its memory
        and its processes bounded as a whole.
    :ivar architecture: ``platform.machine()``.
    :ivar workers_memory_bytes: the limit all workers' groups share
        (``eval.workers_memory_gb``), as the zygote set it (0: none).
    """

    landlock_abi: int = 0
    seccomp: bool = False
    user_namespace: bool = False
    pid_namespace: bool = False
    proc_mount: bool = False
    private_shm: bool = False
    separate_uid: bool = False
    cgroups: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    architecture: str = ""
    workers_memory_bytes: int = 0

    def without(self, mechanisms: Iterable[str]) -> Support:
        """The same support with ``mechanisms`` (landlock, seccomp, namespaces, private_shm,
        cgroups) turned off (``private_shm``: workers use the machine's /dev/shm, writable
        on a GPU only, as before each had its own)."""
        off = set(mechanisms)
        unknown = off - set(MECHANISMS)
        if unknown:
            raise ValueError(f"unknown isolation mechanism(s) {', '.join(sorted(unknown))}: use {', '.join(MECHANISMS)}")
        return attrs.evolve(
            self,
            landlock_abi=0 if "landlock" in off else self.landlock_abi,
            seccomp=self.seccomp and "seccomp" not in off,
            user_namespace=self.user_namespace and "namespaces" not in off,
            pid_namespace=self.pid_namespace and "namespaces" not in off,
            proc_mount=self.proc_mount and "namespaces" not in off,
            private_shm=self.private_shm and "namespaces" not in off and "private_shm" not in off,
            separate_uid=self.separate_uid and "namespaces" not in off,
            cgroups=() if "cgroups" in off else self.cgroups,
            workers_memory_bytes=0 if "cgroups" in off else self.workers_memory_bytes,
        )

    def missing(self) -> list[str]:
        """What is not available, as short phrases for people."""
        gaps = []
        if self.landlock_abi == 0:
            gaps.append("Landlock (files, signals and sockets are not confined)")
        elif self.landlock_abi < 6:
            gaps.append(f"Landlock ABI 6 (this kernel has ABI {self.landlock_abi}: signals and abstract sockets are not scoped)")
        if not self.seccomp:
            gaps.append("seccomp (ptrace, other processes' memory and Unix sockets by path are reachable)")
        if not self.pid_namespace:
            gaps.append("PID namespaces (processes a candidate starts are killed by tracking them instead)")
        else:
            if not self.proc_mount:
                gaps.append("a private /proc (other processes are visible, though not reachable)")
            if not self.private_shm:
                gaps.append("a private /dev/shm (on a GPU, candidates share the machine's /dev/shm)")
        if not self.separate_uid:
            gaps.append("a user id per candidate (processes of all candidates share one user)")
        if "memory" not in self.cgroups:
            gaps.append("a memory cgroup per worker (its memory files, memory file systems and children are bounded per process only)")
        if "pids" not in self.cgroups:
            gaps.append("a pids cgroup per worker (its processes and threads are bounded only with a user id of its own)")
        return gaps

    def summary(self) -> str:
        parts = [f"Landlock ABI {self.landlock_abi}" if self.landlock_abi else "no Landlock"]
        parts.append("seccomp" if self.seccomp else "no seccomp")
        parts.append(
            "PID namespace" + (" + /proc" if self.proc_mount else "") + (" + /dev/shm" if self.private_shm else "") if self.pid_namespace else "no PID namespace"
        )
        parts.append("uid per candidate" if self.separate_uid else "shared uid")
        parts.append(f"cgroup per worker ({', '.join(self.cgroups)})" if self.cgroups else "no cgroups")
        if self.workers_memory_bytes and "memory" in self.cgroups:
            parts.append(f"workers' memory together at most {self.workers_memory_bytes / (1 << 30):.3g} GiB")
        return ", ".join(parts)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise IsolationError(f"{what}: {os.strerror(code)} (errno {code})")
    return result


def landlock_abi() -> int:
    """The running kernel's Landlock ABI version, 0 without Landlock."""
    if sys.platform != "linux":
        return 0
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    value = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
    return max(0, int(value))


def _probe_child(body) -> bool:
    """Run ``body()`` in a forked child; True when it exits with status 0."""
    try:
        pid = os.fork()
    except OSError:
        return False
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            code = 0 if body() else 1
        except BaseException:  # noqa: BLE001
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def _can_seccomp() -> bool:
    def body() -> bool:
        install_seccomp(allow_namespaces=True)
        return True

    return _probe_child(body)


def _can_namespaces() -> tuple[bool, bool, bool, bool]:
    """(user namespace, PID namespace, fresh /proc, private /dev/shm) as a forked child
    finds them."""

    def user() -> bool:
        _unshare(_CLONE_NEWUSER)
        return True

    def pid_and_proc(with_proc: bool):
        def body() -> bool:
            read, write = os.pipe()
            flags = _CLONE_NEWPID | _CLONE_NEWNS | _CLONE_NEWNET | _CLONE_NEWIPC
            if os.geteuid() != 0:
                flags |= _CLONE_NEWUSER
            _unshare(flags)
            child = os.fork()
            if child == 0:
                ok = os.getpid() == 1
                if ok and with_proc:
                    _mount_private_proc()
                os._exit(0 if ok else 1)
            _, status = os.waitpid(child, 0)
            return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0

        return body

    has_user = _probe_child(user)
    has_pid = _probe_child(pid_and_proc(False)) if (has_user or os.geteuid() == 0) else False
    has_proc = _probe_child(pid_and_proc(True)) if has_pid else False
    return has_user, has_pid, has_proc, has_pid and _private_shm_probe()


def _private_shm_probe() -> bool:
    """A forked child mounts a memory file system of its own over /dev/shm in new user and
    mount namespaces and writes there; the file must not land in the machine's."""
    import secrets

    name = f"kz-shm-probe-{secrets.token_hex(8)}"

    def body() -> bool:
        _unshare(_CLONE_NEWNS | (_CLONE_NEWUSER if os.geteuid() != 0 else 0))
        mount_private_shm()
        with open(f"/dev/shm/{name}", "w") as handle:
            handle.write("x")
        return True

    try:
        return _probe_child(body) and not os.path.exists(f"/dev/shm/{name}")
    finally:
        with contextlib.suppress(OSError):
            os.unlink(f"/dev/shm/{name}")  # where the mount did not take


def _readable_by_others() -> bool:
    """Whether an unprivileged user can read this interpreter and its packages (a
    candidate with a uid of its own needs to: an installation under /root is not)."""
    import json
    import sysconfig

    probes = [sysconfig.get_paths()["stdlib"], os.path.dirname(json.__file__)]
    for name in ("torch", "kz_core", "numpy"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            probes.append(os.path.dirname(module.__file__))

    def body() -> bool:
        os.setgroups([])
        os.setresgid(65534, 65534, 65534)
        os.setresuid(65534, 65534, 65534)
        return all(os.access(path, os.R_OK | os.X_OK) for path in probes)

    return os.geteuid() == 0 and _probe_child(body)


@functools.lru_cache(maxsize=1)
def support() -> Support:
    """Probe once (in forked children, so this process is never restricted)."""
    if sys.platform != "linux":
        return Support(architecture=platform.machine())
    arch = platform.machine()
    seccomp = arch in _SYSCALLS and _can_seccomp()
    user, pid, proc, shm = _can_namespaces()
    return Support(
        landlock_abi=landlock_abi(),
        seccomp=seccomp,
        user_namespace=user,
        pid_namespace=pid,
        proc_mount=proc,
        private_shm=shm,
        separate_uid=pid and user and _readable_by_others(),
        cgroups=cgroups.probe(),
        architecture=arch,
    )


# -- namespaces --------------------------------------------------------------------------


def _unshare(flags: int) -> None:
    libc = _libc()
    _check(libc.unshare(ctypes.c_int(flags)), "unshare")


def _mount(source: bytes | None, target: bytes, fstype: bytes | None, flags: int, data: bytes | None = None) -> None:
    libc = _libc()
    _check(libc.mount(source, target, fstype, ctypes.c_ulong(flags), data), f"mount {target.decode()}")


def _mount_private_proc() -> None:
    """In a new mount and PID namespace: stop mount propagation, mount a fresh /proc."""
    _mount(None, b"/", None, _MS_REC | _MS_PRIVATE)
    _mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)


def mount_private_shm() -> None:
    """In a new mount namespace: mount a memory file system of its own (``tmpfs``, at most
    :data:`PRIVATE_SHM_BYTES`) over ``/dev/shm``, after stopping mount propagation. What
    the process and its children create in ``/dev/shm`` from then on (POSIX shared memory
    and semaphores, torch's CUDA IPC reference counts, CUDA's IPC events) lies there: no
    other worker sees it, and it is gone with the namespace's last process.

    A memory file system, not a folder of the scratch folder bind-mounted there: CUDA
    creates its interprocess events only on one (on an H200 with driver 580, an event's
    IPC handle in a folder of an ext4 disk is ``invalid argument``)."""
    _mount(None, b"/", None, _MS_REC | _MS_PRIVATE)
    _mount(b"tmpfs", b"/dev/shm", b"tmpfs", _MS_NOSUID | _MS_NODEV, f"size={PRIVATE_SHM_BYTES},mode=1777".encode())


def mount_private_scratch(scratch: Path, size: int = SCRATCH_BYTES) -> None:
    """In a new mount namespace (after :func:`mount_private_shm`, which stops mount
    propagation): mount a memory file system of at most ``size`` bytes over ``scratch``,
    mode 0700, no setuid files or devices. What the worker writes there cannot fill the
    machine's disk, and it is gone with the namespace's last process. Files already in the
    folder stay on the disk, under the mount (the worker's log, which its supervisor has
    open, and which the parent reads through its own descriptor)."""
    _mount(b"tmpfs", os.fsencode(scratch), b"tmpfs", _MS_NOSUID | _MS_NODEV, f"size={size},mode=0700".encode())


def set_parent_death_signal() -> None:
    """SIGKILL this process when the process that forked it dies."""
    import signal

    _check(_libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")


def become_subreaper() -> None:
    """Orphaned descendants of this process are re-parented to it (not to init)."""
    _check(_libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(PR_SET_CHILD_SUBREAPER)")


def enter_namespaces(isolate_uid: int | None, scratch: Path, private_shm: bool = False, scratch_bytes: int = 0) -> int:
    """Unshare user, PID, mount, network and IPC namespaces, then fork PID 1 of the new PID
    namespace, which forks the process that runs the candidate (the *worker*) with the
    caller's own process id, so that no two sandboxed processes share one (see
    :func:`_fork_worker`), and stays as the namespace's init.

    Called by a freshly forked child of the zygote (the *supervisor*). When ``isolate_uid``
    is given (kz runs as root), a helper forked before the unshare maps root of the new
    user namespace to that unprivileged uid and gives it ``scratch``; otherwise the
    caller's own uid is mapped (unprivileged user namespaces).

    With ``private_shm``, a memory file system of the worker's own is mounted over
    ``/dev/shm`` in the new mount namespace (:func:`mount_private_shm`) before anything
    else runs there, and with ``scratch_bytes`` one of that size over ``scratch``
    (:func:`mount_private_scratch`); a failure raises :class:`IsolationError` (the worker
    does not start).

    :returns: in the supervisor, the pid of the new PID 1 (as this namespace numbers it;
        killing it ends everything in the namespace); in the worker, 0.
    """
    outside = os.getpid()
    uid, gid = os.geteuid(), os.getegid()
    ready_read, ready_write = os.pipe()
    done_read, done_write = os.pipe()
    helper = None
    if isolate_uid is not None:
        helper = os.fork()
        if helper == 0:  # pragma: no cover - the mapping helper, in the old namespaces
            os.close(ready_write)
            os.close(done_read)
            code = 1
            try:
                target = int(os.read(ready_read, 32).decode() or "0")
                for name, value in (("uid_map", f"0 {isolate_uid} 1\n"), ("gid_map", f"0 {isolate_uid} 1\n")):
                    with open(f"/proc/{target}/{name}", "w") as handle:
                        handle.write(value)
                for root, dirs, files in os.walk(scratch):
                    for name in dirs + files:
                        os.lchown(os.path.join(root, name), isolate_uid, isolate_uid)
                os.lchown(scratch, isolate_uid, isolate_uid)
                code = 0
            except BaseException:  # noqa: BLE001
                code = 1
            os.write(done_write, bytes([code]))
            os._exit(code)
    os.close(ready_read)
    os.close(done_write)
    flags = _CLONE_NEWUSER | _CLONE_NEWPID | _CLONE_NEWNS | _CLONE_NEWNET | _CLONE_NEWIPC | _CLONE_NEWUTS
    _unshare(flags)
    if helper is not None:
        os.write(ready_write, str(os.getpid()).encode())
        answer = os.read(done_read, 1)
        os.waitpid(helper, 0)
        if answer != b"\x00":
            raise IsolationError(f"could not map the sandbox's user to uid {isolate_uid}")
        # Become the namespace's root, which is the unprivileged host uid, and drop the
        # supplementary groups inherited from the real root.
        os.setgroups([])
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)
    else:
        with open("/proc/self/setgroups", "w") as handle:
            handle.write("deny\n")
        with open("/proc/self/uid_map", "w") as handle:
            handle.write(f"0 {uid} 1\n")
        with open("/proc/self/gid_map", "w") as handle:
            handle.write(f"0 {gid} 1\n")
    os.close(ready_write)
    os.close(done_read)
    _limit_namespace_counts()
    if private_shm:
        mount_private_shm()
        if scratch_bytes:
            mount_private_scratch(scratch, scratch_bytes)
    child = os.fork()
    if child == 0:
        set_parent_death_signal()
        try:
            _mount_private_proc()
        except IsolationError:
            pass  # reported by support(): other processes stay visible, not reachable
        return _fork_worker(outside)
    return child


#: What a sandboxed worker's user namespace may hold of what the kernel counts per user
#: (``/proc/sys/user``): its counts add to those of the user that made it, the host's root
#: where kz runs as root, whose 128 inotify instances a candidate took (red-team round 27).
NAMESPACE_COUNTS = {"max_inotify_instances": 8, "max_inotify_watches": 8192, "max_fanotify_groups": 0, "max_fanotify_marks": 0}


def _limit_namespace_counts() -> None:
    """In a new user namespace, as its root: lower its per-user counts (a kernel without
    one of them keeps the machine's)."""
    for name, value in NAMESPACE_COUNTS.items():
        with contextlib.suppress(OSError):
            with open(f"/proc/sys/user/{name}", "w") as handle:
                handle.write(str(value))


def _fork_worker(pid: int) -> int:
    """In PID 1 of a new PID namespace: fork the worker with process id ``pid`` and wait
    as the namespace's init, ending with the worker's exit status (128 + the signal that
    killed it); returns 0 in the worker.

    Every sandboxed process would otherwise be PID 1, and what keys on process ids across
    processes then mistakes one for another: CUDA's legacy IPC refuses a memory handle
    whose exporter has the importer's own id. ``pid`` (the supervisor's id outside, which
    no other live process has) is asked for through ``/proc/sys/kernel/ns_last_pid``;
    where the kernel refuses, PID 1 is the worker itself.
    """
    try:
        with open("/proc/sys/kernel/ns_last_pid", "w") as handle:
            handle.write(str(pid - 1))
    except OSError:
        return 0
    confined_read, confined_write = os.pipe()
    worker = os.fork()
    if worker == 0:
        set_parent_death_signal()
        # Run nothing until the init is confined: before that its memory is open to us.
        os.close(confined_write)
        while os.read(confined_read, 1):
            pass
        os.close(confined_read)
        return 0
    # It is confined at least as tightly as the worker, which can see it: not dumpable (its
    # memory cannot be opened through /proc), no file at all (Landlock), the worker's seccomp.
    try:
        _libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
        if landlock_abi():
            apply_landlock([], [])
        install_seccomp()
    except (IsolationError, OSError):
        pass  # what the kernel lacks, the worker lacks too (reported by support())
    # The init holds nothing open: a pipe or socket it kept would never read as closed.
    # Closing the pipe's write end here is what lets the worker go on.
    os.closerange(3, os.sysconf("SC_OPEN_MAX") if os.sysconf("SC_OPEN_MAX") > 0 else 65536)
    while True:  # pragma: no cover - the init: reaps what is re-parented to it
        try:
            reaped, status = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(70)
        if reaped == worker:
            code = os.waitstatus_to_exitcode(status)
            os._exit(128 - code if code < 0 else code)


# -- Landlock ----------------------------------------------------------------------------


def _existing(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    seen: dict[str, None] = {}
    for path in paths:
        text = os.fspath(path)
        if text and os.path.exists(text):
            seen.setdefault(os.path.realpath(text), None)
            seen.setdefault(os.path.abspath(text), None)
    return list(seen)


def apply_landlock(
    read_paths: Sequence[str], write_paths: Sequence[str], device_paths: Sequence[str] = (), lookup_paths: Sequence[str] = ()
) -> int:
    """Confine this process (and its future children) with Landlock: ``read_paths`` are
    readable and executable, ``write_paths`` writable, ``device_paths`` (files) opened for
    reading and writing, files under ``lookup_paths`` opened for reading by a name known
    beforehand (no folder there can be listed); everything else is unreachable. TCP is refused (ABI 4) and
    signals and abstract Unix sockets stay inside the sandbox (ABI 6).

    :returns: the ABI applied (0 when the kernel has no Landlock; nothing was done).
    """
    abi = landlock_abi()
    if abi == 0:
        return 0
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    fs = _fs_rights(abi)
    net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0
    scoped = (_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0
    attr = struct.pack("<QQQ", fs, net, scoped)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    buffer = ctypes.create_string_buffer(attr[:size], size)
    ruleset = _check(libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, buffer, ctypes.c_size_t(size), ctypes.c_uint32(0)), "landlock_create_ruleset")
    try:
        rules = [(p, READ_ACCESS) for p in _existing(read_paths)]
        rules += [(p, WRITE_ACCESS) for p in _existing(write_paths)]
        rules += [(p, DEVICE_ACCESS) for p in _existing(device_paths)]
        rules += [(p, LOOKUP_ACCESS) for p in _existing(lookup_paths)]
        for path, access in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                allowed = access & fs
                if not os.path.isdir(path):  # only file rights apply to a file
                    allowed &= FS_EXECUTE | FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE
                rule = ctypes.create_string_buffer(struct.pack("<Qi", allowed, fd), 12)
                _check(libc.syscall(_SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH), rule, ctypes.c_uint32(0)), f"landlock_add_rule {path}")
            finally:
                os.close(fd)
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


# -- seccomp -----------------------------------------------------------------------------


def _arg(index: int) -> int:
    """The offset of system call argument ``index`` (its low 32 bits) in seccomp_data."""
    return 16 + 8 * index


def _seccomp_program(arch: str, allow_namespaces: bool, candidate: bool = False) -> bytes:
    numbers = _SYSCALLS[arch]
    names = [*DENIED_SYSCALLS, *(CANDIDATE_DENIED_SYSCALLS if candidate else ())]
    denied = sorted({numbers[name] for name in names if name in numbers and not (allow_namespaces and name == "unshare")})
    errno_eperm = _SECCOMP_RET_ERRNO | errno.EPERM
    program: list[tuple[int, int, int, int]] = []

    def ins(code: int, jt: int, jf: int, k: int) -> None:
        program.append((code, jt, jf, k))

    ins(_BPF_LD_W_ABS, 0, 0, 4)  # seccomp_data.arch
    ins(_BPF_JEQ_K, 1, 0, _AUDIT_ARCH[arch])
    ins(_BPF_RET_K, 0, 0, _SECCOMP_RET_KILL_PROCESS)
    ins(_BPF_LD_W_ABS, 0, 0, 0)  # seccomp_data.nr
    if arch == "x86_64":
        ins(_BPF_JGE_K, 0, 1, _X32_SYSCALL_BIT)
        ins(_BPF_RET_K, 0, 0, errno_eperm)
    for number in denied:
        ins(_BPF_JEQ_K, 0, 1, number)
        ins(_BPF_RET_K, 0, 0, errno_eperm)
    # clone3 hides its flags in memory: ENOSYS makes libc fall back to clone.
    ins(_BPF_JEQ_K, 0, 1, numbers["clone3"])
    ins(_BPF_RET_K, 0, 0, _SECCOMP_RET_ERRNO | errno.ENOSYS)
    if not allow_namespaces:
        # clone(flags, ...): refuse new namespaces (args[0] is at offset 16).
        ins(_BPF_JEQ_K, 0, 3, numbers["clone"])
        ins(_BPF_LD_W_ABS, 0, 0, 16)
        ins(_BPF_JSET_K, 0, 1, _NAMESPACE_FLAGS)
        ins(_BPF_RET_K, 0, 0, errno_eperm)
        ins(_BPF_LD_W_ABS, 0, 0, 0)
    # prctl(PR_SET_PDEATHSIG, ...): the sandbox's death signal stays as it was set.
    ins(_BPF_JEQ_K, 0, 4, numbers["prctl"])
    ins(_BPF_LD_W_ABS, 0, 0, 16)
    ins(_BPF_JEQ_K, 0, 1, _PR_SET_PDEATHSIG)
    ins(_BPF_RET_K, 0, 0, errno_eperm)
    ins(_BPF_LD_W_ABS, 0, 0, 0)
    # socket(): a Unix stream or seqpacket socket only (red-team round 26b). Other
    # families would reach the network or the kernel (netlink); a Unix datagram socket can
    # send to any path socket on the host (sendmsg names its address in memory), which
    # Landlock (ABI 7 and before) and the network namespace leave open. A stream or
    # seqpacket socket reaches nothing without connect(), refused above. CUDA's driver makes
    # one when it initialises (its MPS client looks for a daemon): refused, every CUDA
    # process of the sandbox failed with 'cudaGetDeviceCount: OS call failed' (error 304,
    # on the H200 in the thirty-eighth session).
    ins(_BPF_JEQ_K, 0, 9, numbers["socket"])
    ins(_BPF_LD_W_ABS, 0, 0, _arg(0))
    ins(_BPF_JEQ_K, 1, 0, _AF_UNIX)
    ins(_BPF_RET_K, 0, 0, _SECCOMP_RET_ERRNO | errno.EAFNOSUPPORT)
    ins(_BPF_LD_W_ABS, 0, 0, _arg(1))
    ins(_BPF_ALU_AND_K, 0, 0, _SOCK_TYPE_MASK)
    ins(_BPF_JEQ_K, 2, 0, _SOCK_STREAM)
    ins(_BPF_JEQ_K, 1, 0, _SOCK_SEQPACKET)
    ins(_BPF_RET_K, 0, 0, errno_eperm)
    ins(_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW)
    # socketpair(AF_UNIX, SOCK_STREAM or SOCK_SEQPACKET, ...) only: an end of a datagram
    # pair (SOCK_DGRAM, or SOCK_RAW, which Unix sockets make a datagram one) can still be
    # sent through to a path (sendto, sendmsg); a connected stream or seqpacket end cannot.
    ins(_BPF_JEQ_K, 0, 8, numbers["socketpair"])
    ins(_BPF_LD_W_ABS, 0, 0, _arg(0))
    ins(_BPF_JEQ_K, 0, 4, _AF_UNIX)
    ins(_BPF_LD_W_ABS, 0, 0, _arg(1))
    ins(_BPF_ALU_AND_K, 0, 0, _SOCK_TYPE_MASK)
    ins(_BPF_JEQ_K, 2, 0, _SOCK_STREAM)
    ins(_BPF_JEQ_K, 1, 0, _SOCK_SEQPACKET)
    ins(_BPF_RET_K, 0, 0, errno_eperm)
    ins(_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW)
    # sendto(fd, buf, len, flags, dest_addr, addrlen): no address (send() is sendto with
    # none); both halves of the pointer are looked at.
    ins(_BPF_JEQ_K, 0, 6, numbers["sendto"])
    ins(_BPF_LD_W_ABS, 0, 0, _arg(4))
    ins(_BPF_JEQ_K, 0, 2, 0)
    ins(_BPF_LD_W_ABS, 0, 0, _arg(4) + 4)
    ins(_BPF_JEQ_K, 1, 0, 0)
    ins(_BPF_RET_K, 0, 0, errno_eperm)
    ins(_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW)
    # No setuid or setgid file (red-team round 26b): the worker's root is the host's root
    # where kz runs as root with a shared uid, and a setuid copy of a shell left in its
    # scratch folder would be a root shell for any local user. chmod and friends, and the
    # mode of a file created by open, creat or mknod; openat2 hides its mode in memory
    # (ENOSYS: callers fall back to openat). File capabilities (security.capability, written
    # by setxattr) would do what a setuid bit does: extended attributes are refused as
    # unsupported.
    for name, (mode_index, flags_index) in _MODE_ARGUMENTS.items():
        if name not in numbers:
            continue  # aarch64 has only the *at forms
        if flags_index is None:
            ins(_BPF_JEQ_K, 0, 4, numbers[name])
        else:
            ins(_BPF_JEQ_K, 0, 6, numbers[name])
            ins(_BPF_LD_W_ABS, 0, 0, _arg(flags_index))
            ins(_BPF_JSET_K, 0, 3, _O_CREAT_OR_TMPFILE)
        ins(_BPF_LD_W_ABS, 0, 0, _arg(mode_index))
        ins(_BPF_JSET_K, 0, 1, _S_ISUID_ISGID)
        ins(_BPF_RET_K, 0, 0, errno_eperm)
        ins(_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW)
    ins(_BPF_JEQ_K, 0, 1, numbers["openat2"])
    ins(_BPF_RET_K, 0, 0, _SECCOMP_RET_ERRNO | errno.ENOSYS)
    for name in ("setxattr", "lsetxattr", "fsetxattr", "setxattrat"):
        ins(_BPF_JEQ_K, 0, 1, numbers[name])
        ins(_BPF_RET_K, 0, 0, _SECCOMP_RET_ERRNO | errno.EOPNOTSUPP)
    ins(_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW)
    return b"".join(struct.pack("<HBBI", *instruction) for instruction in program)


def install_seccomp(allow_namespaces: bool = False, candidate: bool = False) -> bool:
    """Install the sandbox's seccomp filter on this process (and its future children);
    with ``candidate``, :data:`CANDIDATE_DENIED_SYSCALLS` are refused too.

    :returns: False when this architecture has no system call table here (nothing done).
    """
    arch = platform.machine()
    if sys.platform != "linux" or arch not in _SYSCALLS:
        return False
    program = _seccomp_program(arch, allow_namespaces, candidate)
    count = len(program) // 8
    filters = ctypes.create_string_buffer(program, len(program))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(count, ctypes.cast(filters, ctypes.c_void_p))
    libc = _libc()
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    _check(libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "prctl(PR_SET_SECCOMP)")
    return True


# -- resource limits ---------------------------------------------------------------------


def apply_limits(*, address_space_bytes: int = 0, file_size_bytes: int = 0, open_files: int = 0, processes: int = 0) -> None:
    """Resource limits for this process and its children (0 = leave as inherited).

    ``processes`` only binds a user that is not root (a candidate with a uid of its own).
    """
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for limit, value in (
        (resource.RLIMIT_AS, address_space_bytes),
        (resource.RLIMIT_FSIZE, file_size_bytes),
        (resource.RLIMIT_NOFILE, open_files),
        (resource.RLIMIT_NPROC, processes),
    ):
        if value:
            resource.setrlimit(limit, (value, value))


# -- what a sandboxed process may read ---------------------------------------------------

#: Files under /etc that Python, torch, Triton and CUDA read.
ETC_FILES = (
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/timezone",
    "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/host.conf", "/etc/hosts", "/etc/os-release",
    "/etc/alternatives", "/etc/mime.types", "/etc/ssl/certs", "/etc/gai.conf", "/etc/nvidia",
)
#: Device files opened for reading and writing: the usual ones and every NVIDIA device.
DEVICE_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")


def system_read_paths() -> list[str]:
    """Folders every sandboxed process reads (computed once per process; see
    :func:`_read_paths`)."""
    return list(_read_paths())


@functools.lru_cache(maxsize=1)
def _read_paths() -> tuple[str, ...]:
    """Folders every sandboxed process reads: the interpreter, its packages, the system's
    libraries and tools, ``/proc`` and ``/sys`` (CUDA and torch read both)."""
    import importlib.util
    import site
    import sysconfig

    paths = ["/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/proc", "/sys", *ETC_FILES]
    paths += [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))]
    paths += [p for p in sysconfig.get_paths().values()]
    paths += site.getsitepackages() + [site.getusersitepackages()]
    # Every import path (PYTHONPATH folders, where packages may be installed by hand),
    # except the working directory, which usually holds the run folders.
    cwd = os.path.realpath(os.getcwd())
    paths += [p for p in sys.path if p and os.path.isdir(p) and os.path.realpath(p) != cwd and not cwd.startswith(os.path.realpath(p) + os.sep)]
    from kz_core.plugins import backends

    # nvidia: the CUDA libraries of torch's own wheels (nvidia-cublas-cu12 and the like).
    packages = ["kz_core", "torch", "numpy", "nvidia", *(name for info in backends().values() for name in info.packages)]
    for name in dict.fromkeys(packages):  # the core's, and what each backend needs (BackendInfo.packages)
        spec = importlib.util.find_spec(name) if name not in sys.modules else getattr(sys.modules[name], "__spec__", None)
        for location in (getattr(spec, "submodule_search_locations", None) or []) if spec else []:
            paths.append(location)
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(variable):
            paths.append(os.environ[variable])
    # /opt holds toolchains on many machines (the compiler Triton builds its launcher with).
    paths += ["/usr/local/cuda", "/usr/local/nvidia", "/opt"]
    return tuple(_existing(paths))


def device_files() -> list[str]:
    """Device files a sandboxed process may open for writing (CUDA's included)."""
    found = list(DEVICE_FILES)
    try:
        found += [str(p) for p in Path("/dev").iterdir() if p.name.startswith("nvidia")]
        caps = Path("/dev/nvidia-caps")
        if caps.is_dir():
            found += [str(p) for p in caps.iterdir()]
    except OSError:
        pass
    return _existing(found)
