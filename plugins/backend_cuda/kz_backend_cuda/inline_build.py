"""Building KernelBench ``load_inline`` extensions (backend ``cuda_inline``) in a child process.

A worker that imports a ``cuda_inline`` candidate hands each ``load_inline`` call's
arguments (strings and lists of strings: the sources, ``functions``, compiler flags) to
:func:`build`, which runs torch's own ``load_inline`` on them in a child process
(``python -m kz_backend_cuda.inline_build``):

- **cache**: the build folder is ``<kz cache>/torch_extensions/<key>``, where the key hashes
  the arguments, torch's and Python's versions, the CUDA architecture list, the toolkit and
  the C++ compiler. A second build of the same sources loads the finished library at once;
  a source that failed to compile fails again at once, with the same log. Builds of
  different candidates use different folders, so workers build them in parallel, each
  with ``MAX_JOBS`` compiler processes (:data:`MAX_JOBS`: a load_inline build has two
  translation units, ``main.cpp`` and ``cuda.cu``). Two workers building the same source
  take turns on a lock in its folder; a killed build's lock goes with its process.
  In the evaluator's sandbox the kz cache of a candidate worker is its own scratch folder,
  so nothing built for one candidate is loaded by another (each builds afresh).
- **timeout**: a child that runs past its time is killed with everything it started
  (:data:`BUILD_TIMEOUT_S` per candidate) and the candidate gets ``compile_error``.
- **architecture**: ``TORCH_CUDA_ARCH_LIST`` is the worker's GPU's (without one:
  ``$TORCH_CUDA_ARCH_LIST``, else ``$KZ_CUDA_ARCH``, else sm_90); the child never sees a
  GPU (``CUDA_VISIBLE_DEVICES=""``).
- **torch without CUDA** (a CPU wheel): it cannot link or load a CUDA extension, but with a
  CUDA toolkit the child still compiles both translation units with torch's flags, which
  finds every compiler error; the result says ``checked`` (compiled, not linked).

This module never runs a candidate's Python code: the child builds sources and loads the
built library, nothing else.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs

from kz_core import cache_dir, defer_build, deferring_builds, replace_file, shared_build
from kz_backend_cuda.checks import INLINE_BACKEND

#: Wall-clock seconds all ``load_inline`` builds of one candidate may take together; a
#: cold build of a small extension takes about a minute (most of it compiling torch's
#: headers). Keep it below ``eval.compile_timeout_s`` (180 s by default), which ends the
#: whole worker.
BUILD_TIMEOUT_S = 150.0
#: Compiler processes per build (ninja's ``-j``) unless ``$MAX_JOBS`` says otherwise.
MAX_JOBS = 2
#: The build's record in its folder: the outcome of the finished build.
RECORD_NAME = "kz-build.json"
#: The lock two workers building the same source take turns on (``flock``).
LOCK_NAME = "kz-build.lock"
#: The command that builds one extension; the request and result files follow it.
BUILD_COMMAND: tuple[str, ...] = (sys.executable, "-m", "kz_backend_cuda.inline_build")
#: Keyword arguments of ``load_inline`` that kz decides itself: the build folder is the
#: cache's, output is captured, torch's shared precompiled header is never touched.
IGNORED_ARGUMENTS = frozenset({"build_directory", "verbose", "keep_intermediates", "use_pch"})
NO_NVCC = "cuda_inline needs nvcc (CUDA_HOME) to build: none found"


class InlineBuildError(Exception):
    """A ``load_inline`` build failed, timed out, or cannot run here.

    :ivar message: one line for people.
    :ivar log: the compiler's output (command lines left out), when there is one.
    :ivar unavailable: this machine cannot build it (no nvcc, an incomplete toolkit, torch
        without CUDA headers): not the candidate's fault.
    """

    def __init__(self, message: str, log: str = "", unavailable: bool = False):
        super().__init__(message)
        self.message = message
        self.log = log
        self.unavailable = unavailable


@attrs.frozen
class Toolchain:
    """What builds ``cuda_inline`` extensions in this process.

    :ivar cuda_home: the CUDA toolkit (``bin/nvcc``), or empty when there is none.
    :ivar nvcc: nvcc's release (``13.0``), or empty.
    :ivar arch_list: the ``TORCH_CUDA_ARCH_LIST`` value builds use (``9.0``).
    :ivar torch_cuda: the CUDA version torch was built with, empty for a CPU build.
    :ivar problem: why nothing can be built here, or empty.
    """

    cuda_home: str
    nvcc: str
    arch_list: str
    torch_cuda: str
    problem: str = ""

    @property
    def mode(self) -> str:
        """``build`` (a loadable library) or ``check`` (objects only: torch has no CUDA)."""
        return "build" if self.torch_cuda else "check"


@attrs.frozen
class BuildRecord:
    """The outcome of one extension's build.

    :ivar status: ``built`` (a library to load), ``checked`` (compiled, not linked: torch
        has no CUDA), ``failed`` (the candidate's compiler, argument or loader error;
        ``message`` and ``log`` say) or ``unavailable`` (this machine cannot build it, an
        incomplete toolkit for example; never cached).
    :ivar library: the built library's path (``built`` only).
    :ivar seconds: how long the build took.
    :ivar message: for ``failed``: one line; for ``checked``: why it was not linked.
    :ivar log: the compiler's output, command lines left out.
    :ivar source_file: for ``failed``: ``cuda.cu`` or ``main.cpp``, when the log says.
    :ivar line: for ``failed``: the first error's line in ``source_file``.
    :ivar cached: read from an earlier build's record rather than built now.
    """

    status: str
    library: str = ""
    seconds: float = 0.0
    message: str = ""
    log: str = ""
    source_file: str = ""
    line: int | None = None
    cached: bool = False


# -- the toolchain ---------------------------------------------------------------------------


#: Where :func:`find_cuda_home` looks, for messages.
TOOLKIT_PLACES = "torch's CUDA_HOME, $CUDA_HOME, $CUDA_PATH, nvcc's folder on PATH, /usr/local/cuda"


def find_cuda_home() -> str:
    """The CUDA toolkit builds use ("" when there is none): the first of torch's
    ``CUDA_HOME`` (torch built with CUDA), ``$CUDA_HOME``, ``$CUDA_PATH``, nvcc's folder on
    ``PATH`` and ``/usr/local/cuda`` that holds both ``bin/nvcc`` and
    ``include/cuda_runtime.h`` (a folder of CUDA runtime libraries alone builds nothing)."""
    import torch

    places = []
    if torch.version.cuda:
        from torch.utils import cpp_extension

        places.append(cpp_extension.CUDA_HOME or "")
    places += [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", "")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        places.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    places.append("/usr/local/cuda")
    for place in places:
        if place and os.path.isfile(os.path.join(place, "bin", "nvcc")) and os.path.isfile(os.path.join(place, "include", "cuda_runtime.h")):
            return place
    return ""


@functools.cache
def nvcc_release(cuda_home: str) -> str:
    """``13.0`` from ``nvcc --version`` (empty when it does not answer)."""
    try:
        output = subprocess.run([os.path.join(cuda_home, "bin", "nvcc"), "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    match = re.search(r"release (\d+\.\d+)", output)
    return match.group(1) if match else ""


def arch_list(device: str) -> str:
    """``TORCH_CUDA_ARCH_LIST`` for builds: the GPU's architecture when ``device`` is one;
    else ``$TORCH_CUDA_ARCH_LIST``; else the kz CUDA default (``$KZ_CUDA_ARCH`` or sm_90)."""
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability(device)
        return f"{major}.{minor}"
    configured = os.environ.get("TORCH_CUDA_ARCH_LIST", "").strip()
    if configured:
        return configured
    from kz_backend_cuda.nvrtc import current_arch

    match = re.fullmatch(r"sm_(\d+)(\d)([a-z]?)", current_arch())
    return f"{match.group(1)}.{match.group(2)}{match.group(3)}" if match else "9.0"


def build_path() -> str:
    """``PATH`` for builds: the worker's, with this Python's scripts folder and the ``ninja``
    package's binary folder in front (torch runs ``ninja`` from ``PATH``)."""
    folders = [os.path.dirname(sys.executable)]
    with contextlib.suppress(ImportError, AttributeError):
        import ninja  # the PyPI package, where installed

        folders.append(str(ninja.BIN_DIR))
    return os.pathsep.join([*folders, os.environ.get("PATH", "")])


def toolchain(device: str) -> Toolchain:
    """The toolchain for builds in this process, with ``problem`` set when it cannot build."""
    import torch

    cuda_home = find_cuda_home()
    torch_cuda = str(torch.version.cuda or "")
    arches = arch_list(device)
    if not cuda_home:
        problem = f"{NO_NVCC} (no bin/nvcc with include/cuda_runtime.h in {TOOLKIT_PLACES}; install the CUDA toolkit and set CUDA_HOME)"
        return Toolchain("", "", arches, torch_cuda, problem)
    nvcc = nvcc_release(cuda_home)
    if shutil.which("ninja", path=build_path()) is None:
        return Toolchain(cuda_home, nvcc, arches, torch_cuda, "cuda_inline needs ninja to build: none found on PATH (pip install ninja)")
    if torch_cuda and nvcc and nvcc.split(".")[0] != torch_cuda.split(".")[0]:
        # torch's own setup.py builds refuse this too: the extension would not link or load.
        problem = f"cuda_inline needs an nvcc of torch's CUDA {torch_cuda}: {cuda_home}/bin/nvcc is release {nvcc}"
        return Toolchain(cuda_home, nvcc, arches, torch_cuda, problem)
    return Toolchain(cuda_home, nvcc, arches, torch_cuda)


# -- keys, folders, records -------------------------------------------------------------------


def identity(tools: Toolchain) -> dict[str, Any]:
    """Everything beside the arguments that shapes a build's binary."""
    import torch

    return {
        "mode": tools.mode,
        "torch": torch.__version__,
        "torch_cuda": tools.torch_cuda,
        "python": sys.implementation.cache_tag,
        "arch_list": tools.arch_list,
        "cuda_home": tools.cuda_home,
        "nvcc": tools.nvcc,
        "cxx": os.environ.get("CXX", "c++"),
    }


def build_identity(device: str) -> dict[str, Any]:
    """``BackendInfo.build_identity`` of ``cuda_inline``: the toolchain's :func:`identity`."""
    return identity(toolchain(device))


def build_key(arguments: dict[str, Any], tools: Toolchain) -> str:
    """The cache key of one build: its arguments and everything that shapes the binary."""
    return hashlib.sha256(json.dumps({"arguments": arguments, **identity(tools)}, sort_keys=True).encode()).hexdigest()[:32]


def build_folder(key: str) -> Path:
    return cache_dir() / "torch_extensions" / key


def read_record(folder: Path) -> BuildRecord | None:
    """The finished build's record in ``folder``, if there is a usable one."""
    try:
        data = json.loads((folder / RECORD_NAME).read_text())
        record = BuildRecord(**data)
    except (OSError, ValueError, TypeError):
        return None
    if record.status == "built":
        # The library is named relative to its folder (a shared build was made elsewhere
        # and moved); a path that leaves the folder is not this build's.
        library = (folder / record.library).resolve()
        if folder.resolve() not in library.parents or not library.is_file():
            return None
        record = attrs.evolve(record, library=str(library))
    return record


def _write_record(folder: Path, record: BuildRecord) -> None:
    replace_file(folder / RECORD_NAME, json.dumps(attrs.asdict(record)))


# -- reading compiler output ------------------------------------------------------------------

_COMMAND_LINE = re.compile(r"^(\[\d+/\d+\] |\S*(nvcc|c\+\+|g\+\+|gcc|clang\+\+|cc)\s)")
_FIRST_ERROR = re.compile(
    r"(?:^|[/\s])(cuda\.cu|main\.cpp)(?:\((\d+)\)|:(\d+):\d+):\s*(?:fatal |catastrophic )?error[:\s]+(.*)", re.MULTILINE
)
_ERRORS = re.compile(r"(?:\(\d+\)|:\d+:\d+): (?:fatal |catastrophic )?error", re.MULTILINE)
_MISSING_HEADER = (
    re.compile(r"^(\S+?):\d+:\d+: fatal error: (\S+): No such file or directory", re.MULTILINE),
    re.compile(r'^(\S+?)\(\d+\): catastrophic error: cannot open source file "([^"]+)"', re.MULTILINE),
)
_FAILED_OUTPUT = re.compile(r"^FAILED: (?:\[code=\d+\] )?(\S+)", re.MULTILINE)


def readable_log(output: str, folder: Path) -> str:
    """Compiler output without ninja's command lines, with the build folder's path removed."""
    lines = [line for line in output.splitlines() if not _COMMAND_LINE.match(line)]
    return "\n".join(lines).replace(f"{folder}{os.sep}", "").strip()


def first_error(log: str) -> tuple[str, int | None, str]:
    """``(file, line, text)`` of the first error in ``cuda.cu`` or ``main.cpp``."""
    match = _FIRST_ERROR.search(log)
    if match is None:
        return "", None, ""
    return match.group(1), int(match.group(2) or match.group(3)), match.group(4).strip()


def toolkit_gap(log: str, cuda_home: str) -> str:
    """Why a build failed for want of a header that torch's or CUDA's own headers include
    (an incomplete toolkit, or torch built without CUDA: not the candidate's fault), or ""."""
    import torch

    torch_headers = os.path.join(os.path.dirname(torch.__file__), "include")
    for pattern in _MISSING_HEADER:
        for match in pattern.finditer(log):
            including, header = match.group(1), match.group(2)
            if including.startswith(torch_headers) and not torch.version.cuda and header.startswith(("c10/", "ATen/", "torch/", "caffe2/")):
                where = f"torch {torch.__version__}, a build without CUDA, which does not ship the CUDA headers of torch's CUDA builds"
            elif including.startswith((torch_headers, cuda_home or "/nonexistent")):
                where = f"the CUDA toolkit at {cuda_home}"
            else:
                continue
            included_by = os.path.relpath(including, torch_headers) if including.startswith(torch_headers) else including
            return f"cannot compile here: {header} (included by {included_by}) is missing from {where}"
    return ""


# -- running a build ---------------------------------------------------------------------------


class BuildTimeout(Exception):
    """The build child ran past its time and was killed."""


def run_child(command: list[str], env: dict[str, str], timeout_s: float, log_path: Path, cwd: Path) -> int:
    """Run ``command`` in a session of its own, its output in ``log_path``; kill the
    session (the child and every compiler it started) when it runs past ``timeout_s``.

    :returns: the exit status.
    :raises BuildTimeout: when it ran past ``timeout_s``.
    """
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        return process.wait(timeout=max(timeout_s, 0.001))
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise BuildTimeout(f"killed after {timeout_s:g} s") from None


def child_environment(tools: Toolchain) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = build_path()
    env["TORCH_CUDA_ARCH_LIST"] = tools.arch_list
    env.setdefault("MAX_JOBS", str(MAX_JOBS))
    env["CUDA_VISIBLE_DEVICES"] = ""  # a build needs no GPU; the child makes no context
    env["TORCH_EXTENSIONS_DIR"] = str(cache_dir() / "torch_extensions")
    if tools.cuda_home:
        env["CUDA_HOME"] = tools.cuda_home
    return env


def build(arguments: dict[str, Any], tools: Toolchain, timeout_s: float) -> BuildRecord:
    """Build one extension in a child process, or find its finished build in the cache.

    :param arguments: ``load_inline``'s keyword arguments, plain data, without
        :data:`IGNORED_ARGUMENTS`.
    :param timeout_s: how long the child may take.
    :returns: the record: ``built``, ``checked`` or ``failed`` (a compiler error is a
        result, for the caller to map to the candidate's lines).
    :raises InlineBuildError: when the toolchain cannot build here, the child runs past
        ``timeout_s``, or it ends without reporting.
    """
    if tools.problem:
        raise InlineBuildError(tools.problem, unavailable=True)
    shared = shared_build(INLINE_BACKEND, arguments, identity(tools))
    if shared is not None:
        record = read_record(shared)
        if record is not None:
            return attrs.evolve(record, cached=True)
    if deferring_builds():
        defer_build(INLINE_BACKEND, arguments)  # kz's trusted builder builds it; raises BuildDeferred
    return build_into(build_folder(build_key(arguments, tools)), arguments, tools, timeout_s)


def build_shared(arguments: dict[str, Any], folder: str, device: str) -> dict[str, Any]:
    """``BackendInfo.builder`` of ``cuda_inline``: build ``arguments`` into ``folder`` in
    kz's trusted builder (a fresh worker that ran no candidate code); the record, as data."""
    tools = toolchain(device)
    if tools.problem:
        return attrs.asdict(BuildRecord("unavailable", message=tools.problem))
    try:
        record = build_into(Path(folder), arguments, tools, BUILD_TIMEOUT_S)
    except InlineBuildError as exc:
        return attrs.asdict(BuildRecord("unavailable" if exc.unavailable else "failed", message=exc.message, log=exc.log))
    return attrs.asdict(record)


def build_into(folder: Path, arguments: dict[str, Any], tools: Toolchain, timeout_s: float) -> BuildRecord:
    """:func:`build` in ``folder`` (its record there, if finished, is the result)."""
    record = read_record(folder)
    if record is not None:
        return attrs.evolve(record, cached=True)
    folder.mkdir(parents=True, exist_ok=True)
    name = arguments.get("name", "?")
    with tempfile.TemporaryDirectory(prefix="kz-inline-") as scratch:
        request = Path(scratch) / "request.json"
        result = Path(scratch) / "result.json"
        output = Path(scratch) / "output.log"
        request.write_text(json.dumps({"arguments": arguments, "folder": str(folder), "cuda_home": tools.cuda_home, "mode": tools.mode}))
        started = time.perf_counter()
        try:
            status = run_child([*BUILD_COMMAND, str(request), str(result)], child_environment(tools), timeout_s, output, folder)
        except BuildTimeout:
            raise InlineBuildError(
                f"load_inline: building extension {name!r} ran past the cuda_inline build timeout "
                f"(BUILD_TIMEOUT_S = {BUILD_TIMEOUT_S:g} s for all of a candidate's builds); killed after {max(timeout_s, 0):.1f} s",
                log=readable_log(output.read_text(errors="replace"), folder)[-4000:],
            ) from None
        if not result.is_file():
            tail = output.read_text(errors="replace")[-4000:]
            raise InlineBuildError(f"load_inline: the build of extension {name!r} exited with status {status} without a result", log=tail)
        record = BuildRecord(**json.loads(result.read_text()))
    if record.status == "unavailable":
        raise InlineBuildError(record.message, log=record.log, unavailable=True)
    return attrs.evolve(record, seconds=record.seconds or time.perf_counter() - started)


# -- the child ---------------------------------------------------------------------------------


def _child_build(arguments: dict[str, Any], folder: Path, cuda_home: str, mode: str) -> BuildRecord:
    """Run torch's ``load_inline`` on ``arguments`` in ``folder`` (inside the child)."""
    from torch.utils import cpp_extension

    if mode == "check":
        # torch without CUDA has no CUDA_HOME of its own; nvcc still compiles with its flags.
        cpp_extension.CUDA_HOME = cuda_home
    started = time.perf_counter()
    name = str(arguments.get("name", ""))
    try:
        module = cpp_extension.load_inline(**arguments, build_directory=str(folder), verbose=False)
    except RuntimeError as exc:
        text = str(exc)
        seconds = time.perf_counter() - started
        if not text.startswith("Error building extension"):
            return BuildRecord("failed", seconds=seconds, message=f"load_inline: {text.splitlines()[0] if text else type(exc).__name__}", log=text)
        log = readable_log(text.partition(": ")[2], folder)
        failed = _FAILED_OUTPUT.findall(text)
        if mode == "check" and failed and all(output.endswith(".so") for output in failed):
            return BuildRecord(
                "checked",
                seconds=seconds,
                message=f"not linked: torch {_torch_version()} is a build without CUDA, which cannot link or load CUDA extensions",
                log=log,
            )
        gap = toolkit_gap(log, cuda_home)
        if gap:
            return BuildRecord("unavailable", seconds=seconds, message=gap, log=log)
        source_file, line, text_of_error = first_error(log)
        count = len(_ERRORS.findall(log))
        summary = f"load_inline: {count or 'a'} compiler error{'s' if count > 1 else ''} building extension {name!r}"
        return BuildRecord("failed", seconds=seconds, message=f"{summary}: {text_of_error}" if text_of_error else summary, log=log, source_file=source_file, line=line)
    except (TypeError, ValueError, ImportError) as exc:  # a bad argument, a library that does not load
        return BuildRecord("failed", seconds=time.perf_counter() - started, message=f"load_inline: {type(exc).__name__}: {exc}", log=str(exc))
    except Exception as exc:  # noqa: BLE001 - the machine's toolchain, not the candidate
        return BuildRecord("unavailable", seconds=time.perf_counter() - started, message=f"load_inline could not build here: {type(exc).__name__}: {exc}", log=str(exc))
    library = module if isinstance(module, str) else str(getattr(module, "__file__", ""))
    # Relative to the folder: a shared build is made in a builder's scratch folder and moved.
    return BuildRecord("built", library=os.path.relpath(library, folder), seconds=time.perf_counter() - started)


def _torch_version() -> str:
    import torch

    return torch.__version__


def main(argv: list[str]) -> int:
    """``python -m kz_backend_cuda.inline_build REQUEST RESULT``: build, write the record."""
    import fcntl

    request = json.loads(Path(argv[0]).read_text())
    folder = Path(request["folder"])
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / LOCK_NAME, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when this process ends, however it ends
        record = read_record(folder)
        if record is None:
            # Holding the lock, nobody else builds here: a baton torch left behind when a
            # build was killed is stale.
            (folder / "lock").unlink(missing_ok=True)
            record = _child_build(request["arguments"], folder, request["cuda_home"], request["mode"])
            if record.status != "unavailable":
                _write_record(folder, record)
        else:
            record = attrs.evolve(record, cached=True)
    Path(argv[1]).write_text(json.dumps(attrs.asdict(record)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
