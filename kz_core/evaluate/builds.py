"""Builds shared between candidates, made by a trusted builder.

A backend whose candidates build native code at import (``cuda_inline``: KernelBench's
``load_inline``, about a minute of nvcc per extension) would build it again for every
candidate, because what a candidate's process writes can never be read by another (it
could plant a library for another candidate's sources). Instead:

1. In a candidate worker, the backend looks for the build in the shared folder
   (:data:`SHARED_ENV`, readable, not writable there) under :func:`shared_key` of its
   arguments and the toolchain's identity. When it is missing, the backend calls
   :func:`defer` instead of building: the import fails and the load's reply lists the
   deferred builds (data: the backend's name and the build's arguments).
2. The evaluator (``Evaluator._build_deferred``) has each deferred build made by a
   *builder*: a fresh candidate worker that has run no candidate code. It first reports
   the toolchain's identity, then builds the arguments into its scratch folder with the
   backend's ``BackendInfo.builder`` function; the evaluator computes the key itself and
   moves the folder into the shared folder under it (only plain files and folders; the
   build's own record names its library relative to the folder). Whatever the arguments
   make the compiler do, it lands under the key of exactly those arguments.
3. The candidate is loaded again, in a fresh worker, and finds its builds. The builds are
   made with nothing of the GPU held (``Evaluator._evaluate_verified``: the deferring
   worker is ended and the GPU lock and memory reservation given back first); a backend
   without trusted kernels loads again in its own worker, which holds no GPU lock.

A re-run, or another candidate with the same sources and flags, builds nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import uuid
from pathlib import Path
from typing import Any

from kz_core.paths import remove_tree

#: In candidate workers: the shared folder of finished builds (read-only there).
SHARED_ENV = "KZ_SHARED_BUILDS"
#: In every worker of an evaluator: its ``eval.compile_timeout_s``, the seconds a compile
#: (a candidate's load, kz's builder) may take before the worker is ended; a backend that
#: builds stops its builds before it.
COMPILE_TIMEOUT_ENV = "KZ_COMPILE_TIMEOUT_S"
#: In candidate workers: "1" when a missing build is deferred to the trusted builder.
DEFER_ENV = "KZ_DEFER_BUILDS"
#: The shared folder's name under the kz cache.
FOLDER = "builds"
#: Builds a candidate may defer in one load, and arguments' size (JSON bytes).
MAX_DEFERRED = 8
MAX_ARGUMENT_BYTES = 4 << 20
#: Bytes a build's folder may take to be shared.
MAX_BUILD_BYTES = 2 << 30
#: Folders deep a build's folder may be to be shared (a build is a few deep).
MAX_BUILD_DEPTH = 64

#: In a candidate worker: the builds deferred during the current load.
DEFERRED: list[dict[str, Any]] = []


class BuildDeferred(Exception):
    """Raised in a candidate worker instead of building: the trusted builder builds it."""


def shared_key(backend: str, arguments: Any, identity: Any) -> str:
    """The key of one build: the backend, its arguments and the toolchain's identity."""
    text = json.dumps({"backend": backend, "arguments": arguments, "identity": identity}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def shared_folder(backend: str, key: str) -> Path | None:
    """Where a finished build of ``key`` is, when this process has a shared folder."""
    root = os.environ.get(SHARED_ENV, "")
    return Path(root) / backend / key if root else None


def shared_build(backend: str, arguments: Any, identity: Any) -> Path | None:
    """Where the shared build of ``arguments`` would be (``None``: this process has no
    shared folder): :func:`shared_folder` of :func:`shared_key`."""
    return shared_folder(backend, shared_key(backend, arguments, identity))


def deferring() -> bool:
    """Whether a missing build is deferred (in a candidate worker of an evaluator)."""
    return os.environ.get(DEFER_ENV) == "1"


def defer(backend: str, arguments: Any, last: bool = True, optional: bool = False) -> None:
    """Hand one build to the trusted builder: recorded for the load's reply, then raised
    (:class:`BuildDeferred`). With ``last=False`` it is only recorded (a build that a
    later deferred one uses: they are made in order); an ``optional`` build that cannot be
    made is no failure of the candidate (its user builds without it)."""
    DEFERRED.append({"backend": backend, "arguments": arguments, **({"optional": True} if optional else {})})
    if last:
        raise BuildDeferred(f"{backend}: this build is made by kz's trusted builder, and the candidate is loaded again once it is")


def validate_deferred(entries: Any, builders: dict[str, Any]) -> list[dict[str, Any]]:
    """The deferred builds of a load reply, checked to be data for a backend with a
    builder; raises ``ValueError`` naming what is wrong."""
    if not isinstance(entries, list) or len(entries) > MAX_DEFERRED:
        raise ValueError(f"deferred builds must be a list of at most {MAX_DEFERRED}")
    checked = []
    for entry in entries:
        if not isinstance(entry, dict) or not {"backend", "arguments"} <= set(entry) <= {"backend", "arguments", "optional"} or entry["backend"] not in builders:
            raise ValueError("a deferred build must name a backend with a builder and its arguments")
        if entry.get("optional", False) is not True and "optional" in entry:
            raise ValueError("a deferred build's 'optional' must be true when given")
        if len(json.dumps(entry["arguments"], sort_keys=True)) > MAX_ARGUMENT_BYTES:
            raise ValueError("a deferred build's arguments are too large")
        checked.append(entry)
    return checked


def plain_tree(folder: Path) -> bool:
    """Whether ``folder`` holds only folders and regular files (no links, devices or
    sockets) of at most :data:`MAX_BUILD_BYTES` in all, at most :data:`MAX_BUILD_DEPTH`
    folders deep. Walked with a list of folders, not on the stack: a compiler driven by a
    candidate's flags could leave a tree deep enough for ``os.walk`` (recursive before
    Python 3.12) to raise ``RecursionError`` in the evaluator."""
    if folder.is_symlink() or not folder.is_dir():
        return False
    total = 0
    pending = [(folder, 0)]
    while pending:
        current, depth = pending.pop()
        try:
            with os.scandir(current) as entries:
                for entry in entries:
                    if entry.is_symlink():
                        return False
                    if entry.is_dir(follow_symlinks=False):
                        if depth + 1 > MAX_BUILD_DEPTH:
                            return False
                        pending.append((Path(entry.path), depth + 1))
                    elif entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
                        if total > MAX_BUILD_BYTES:
                            return False
                    else:
                        return False
        except OSError:
            return False
    return True


def publish(folder: Path, root: Path, backend: str, key: str) -> bool:
    """Move a builder's ``folder`` into ``root/backend/key`` (atomically; a build that is
    already there stays). False when the folder is not a plain tree."""
    if not plain_tree(folder):
        return False
    target = root / backend / key
    if target.exists():
        return True
    staging = root / backend / f".incoming-{uuid.uuid4().hex}"
    staging.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(folder), str(staging))
    try:
        os.rename(staging, target)
    except OSError:  # another builder published the same key first
        remove_tree(staging)  # a build driven by a candidate's flags: never raises
    return True


class SharedBuilds:
    """The evaluator's side: identities per backend and one build per key at a time."""

    def __init__(self, root: Path):
        self.root = root
        self.identities: dict[str, Any] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def lock(self, key: str) -> threading.Lock:
        with self._lock:
            return self._locks.setdefault(key, threading.Lock())
