"""A candidate's scratch folder is hostile ground for kz's own processes (red-team round 26b).

Its ``worker.log`` was replaced by a link to the parent's ``/proc/self/environ`` (the token
in it came back in the finding of the candidate's crash), to a key file, by a FIFO (the
parent hung in ``open``) or a link to ``/dev/zero`` (the parent's memory grew without
bound): the parent now reads the log through the descriptor it opened when it created it.
A tree 1500 folders deep made ``shutil.rmtree`` raise ``RecursionError``, which ended the
batch, kept the pool's only slot and left the tree (a setuid copy of a shell at its
bottom) under /tmp: the removal now never recurses and never raises, and the slot is given
back whatever it does.
"""

from __future__ import annotations

import contextlib
import os
import resource
import select
import signal
import stat
import tempfile
import threading
import time
from pathlib import Path

import pytest

from kz_core.evaluate import sandbox
from kz_core.evaluate.sandbox import SandboxSettings, WorkerPool, ZygoteProcess

SECRET = "HF_TOKEN=hf_this_must_never_be_read_back"


@pytest.fixture(autouse=True)
def _tidy(tmp_path):
    """A deep tree that a failing test leaves would end pytest's own sweep of old temporary
    folders (``shutil.rmtree``) in ``RecursionError``: removed here whatever happened."""
    yield
    from kz_core import paths

    if hasattr(paths, "remove_tree"):
        paths.remove_tree(tmp_path)


def deep_tree(top: Path, depth: int, leaf: str = "setuid-copy") -> None:
    """``top`` with ``depth`` nested folders below it and a setuid file at the bottom, made
    through descriptors (its path is far longer than PATH_MAX)."""
    top.mkdir()
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        file = os.open(leaf, os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd)
        os.write(file, b"#!/bin/sh\n")
        os.fchmod(file, 0o4755)
        os.close(file)
    finally:
        os.close(fd)


def in_child(body, timeout: float = 20.0, memory_bytes: int = 0) -> tuple[int | None, bytes]:
    """Run ``body()`` (which returns bytes) in a forked child with at most ``memory_bytes``
    more address space (0: no limit) and ``timeout`` seconds: ``(exit status or None if it
    had to be killed, what it returned)``. The code before the fix hangs or eats memory
    without end here; in a child, that fails the test instead of the machine."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.close(read_end)
            if memory_bytes:
                with open("/proc/self/statm") as handle:
                    pages = int(handle.read().split()[0])
                limit = pages * os.sysconf("SC_PAGE_SIZE") + memory_bytes
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            data = body()
            os.write(write_end, data[: 1 << 16])
            code = 0
        except BaseException:  # noqa: BLE001
            code = 2
        finally:
            os._exit(code)
    os.close(write_end)
    deadline = time.monotonic() + timeout
    chunks = []
    status = None
    try:
        while True:
            ready, _, _ = select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        while time.monotonic() < deadline:
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(raw)
                break
            time.sleep(0.02)
    finally:
        if status is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(read_end)
    return status, b"".join(chunks)


# -- removing a hostile tree ------------------------------------------------------------------
def test_a_tree_3000_folders_deep_is_removed_without_error(tmp_path):
    top = tmp_path / "candidate-1"
    deep_tree(top, 3000)
    sandbox._remove_tree(top)  # raised RecursionError before
    assert not top.exists() and os.listdir(tmp_path) == []


def test_links_in_the_tree_are_removed_never_followed(tmp_path):
    """Links to a folder and a file outside, deep in the tree, go; what they name stays."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "rows.key").write_text(SECRET)
    top = tmp_path / "candidate-1"
    deep_tree(top, 1500)
    bottom = Path(os.path.join(top, *["d"] * 20))
    os.symlink(outside, bottom / "to-folder")
    os.symlink(outside / "rows.key", bottom / "to-file")
    os.symlink(tmp_path, top / "to-parent")
    sandbox._remove_tree(top)
    assert not top.exists()
    assert sorted(os.listdir(tmp_path)) == ["outside"]
    assert os.listdir(outside) == ["rows.key"] and (outside / "rows.key").read_text() == SECRET


def test_folders_that_may_not_be_entered_are_removed(tmp_path):
    """A candidate may ``chmod 000`` its folders (and its scratch folder itself): an owner
    that is not root must give itself permission before it can list and empty them. Run
    as an unprivileged user (in a forked child) when the tests run as root, whom no mode
    stops."""
    nobody = 65534
    as_root = os.geteuid() == 0
    # As root: a folder the unprivileged user can reach (pytest's are root's alone).
    base = Path(tempfile.mkdtemp(prefix="kz-test-")) if as_root else tmp_path
    try:
        top = base / "candidate-1"
        (top / "a" / "b").mkdir(parents=True)
        (top / "a" / "b" / "file").write_text("x")
        (top / "a" / "locked-file").write_text("x")
        (top / "open").mkdir()
        made = [base, top, top / "a", top / "a" / "b", top / "a" / "b" / "file", top / "a" / "locked-file", top / "open"]
        if as_root:
            for path in made:
                os.lchown(path, nobody, nobody)
        os.chmod(top / "a" / "locked-file", 0)
        os.chmod(top / "a" / "b", 0)
        os.chmod(top / "a", 0o100)  # search only: not listable
        os.chmod(top, 0)

        def remove() -> bytes:
            sandbox._remove_tree(top)
            try:
                os.lstat(top)
            except FileNotFoundError:
                return b"gone"
            return b"left"

        if as_root:

            def body() -> bytes:
                os.setgroups([])
                os.setresgid(nobody, nobody, nobody)
                os.setresuid(nobody, nobody, nobody)
                return remove()

            status, said = in_child(body)
            assert status == 0, status
        else:
            said = remove()
        assert said == b"gone" and not os.path.lexists(top)
    finally:
        if as_root:
            sandbox._remove_tree(base)


def test_the_pool_slot_is_given_back_when_the_removal_fails(tmp_path, monkeypatch):
    """With one slot, a removal that raised kept it forever: the next acquire waited."""
    pool = WorkerPool("cpu", "candidate", 1, SandboxSettings(scratch_root=tmp_path), single_use=True)
    replaced = []

    class Worker:
        def __init__(self):
            self.retired, self.uses, self.binding, self.scratch = False, 0, None, tmp_path / "candidate-x"

        def kill(self, *, record=True):
            self.retired = True

        def discard_scratch(self):
            sandbox._remove_tree(self.scratch)

    def failing_remove(path):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(pool, "_start", lambda: Worker())
    monkeypatch.setattr(pool, "_replace", lambda: replaced.append(True))
    monkeypatch.setattr(sandbox, "_remove_tree", failing_remove)
    with pytest.raises(RecursionError), pool.acquire():
        pass
    assert replaced == [True]


# -- against real workers ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def zygote(tmp_path_factory):
    settings = SandboxSettings(scratch_root=tmp_path_factory.mktemp("scratch") / "kz-eval-test")
    zygote = ZygoteProcess("cpu", settings)
    try:
        yield zygote
    finally:
        zygote.close()
        sandbox._remove_tree(settings.scratch_root)


def test_the_scratch_root_and_each_scratch_folder_are_private(zygote):
    """No other local user may list the scratch root (0o700; 0o711 where candidates run as
    uids of their own and must pass through it) or enter a worker's folder (0o700): both
    were 0o755, and the tree a candidate left there held a setuid copy of a shell."""
    pool = WorkerPool("cpu", "candidate", 1, zygote.settings, zygote=zygote)
    try:
        with pool.acquire() as worker:
            assert stat.S_IMODE(os.stat(zygote.settings.scratch_root).st_mode) & 0o077 in (0, 0o011)
            assert stat.S_IMODE(os.stat(worker.scratch).st_mode) & 0o077 == 0
    finally:
        pool.close()


@pytest.mark.parametrize("replacement", ["environ", "key file", "dev zero", "fifo"])
def test_the_log_tail_is_read_from_the_file_kz_made(zygote, tmp_path, replacement):
    """The worker's log is replaced after it started (as its candidate did) by a link to
    this process's environment, to a secret file, to /dev/zero, or by a FIFO: the tail is
    what the worker wrote, at most ``size`` bytes, and comes back at once."""
    secret = tmp_path / "rows.key"
    secret.write_text(SECRET)
    target = {"environ": "/proc/self/environ", "key file": secret, "dev zero": "/dev/zero", "fifo": None}[replacement]
    pool = WorkerPool("cpu", "candidate", 1, zygote.settings, zygote=zygote)
    try:
        with pool.acquire() as worker:
            worker.kill()
            with contextlib.suppress(Exception):
                worker.process.wait(timeout=10)  # nothing writes to the log any more
            log = worker.scratch / "worker.log"
            with open(log, "ab") as handle:  # what the worker wrote, then its last line
                handle.write(b"x" * 10000 + b"\nthe worker's last words\n")
            log.unlink()
            if target is None:
                os.mkfifo(log)
            else:
                os.symlink(target, log)

            status, tail = in_child(lambda: worker.log_tail(100).encode(), timeout=20, memory_bytes=256 << 20)
            assert status == 0, f"log_tail did not come back ({status})"
            assert SECRET.split("=", 1)[1].encode() not in tail
            assert tail.endswith(b"the worker's last words\n") and len(tail) <= 100, tail[-200:]
            assert worker.log_tail(100).endswith("the worker's last words\n")
    finally:
        pool.close()


def test_a_deep_tree_left_by_a_worker_keeps_neither_the_slot_nor_the_tree(zygote):
    """A candidate worker leaves a tree 3000 deep: the pool's only slot serves the next
    candidate, the tree is gone, and no worker leaves a descriptor behind."""
    descriptors = len(os.listdir("/proc/self/fd"))
    pool = WorkerPool("cpu", "candidate", 1, zygote.settings, zygote=zygote)
    try:
        with pool.acquire() as worker:
            first = worker.scratch
            deep_tree(first / "tree", 3000)
        assert not first.exists()
        served = []

        def next_candidate() -> None:
            with pool.acquire() as worker:
                served.append(worker.scratch)

        thread = threading.Thread(target=next_candidate, daemon=True)
        thread.start()
        thread.join(60)
        assert served, "the pool's only slot was never given back"
        assert not served[0].exists()
    finally:
        pool.close()
    assert len(os.listdir("/proc/self/fd")) <= descriptors
