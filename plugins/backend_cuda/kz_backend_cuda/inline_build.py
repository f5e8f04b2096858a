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
  (:func:`build_timeout_s` per candidate) and the candidate gets ``compile_error``.
- **architecture**: ``TORCH_CUDA_ARCH_LIST`` is the worker's GPU's (without one:
  ``$TORCH_CUDA_ARCH_LIST``, else ``$KZ_CUDA_ARCH``, else sm_90); the child never sees a
  GPU (``CUDA_VISIBLE_DEVICES=""``).
- **torch without CUDA** (a CPU wheel): it cannot link or load a CUDA extension, but with a
  CUDA toolkit the child still compiles both translation units with torch's flags, which
  finds every compiler error; the result says ``checked`` (compiled, not linked).
- **the prelude, a faster path than a plain ``load_inline``**: most of a cold build is the
  compilers reading torch's headers, above all ``torch/extension.h`` (``torch/all.h``, the
  whole C++ frontend, and pybind11), which ``main.cpp`` starts with and nearly every
  KernelBench ``cuda_sources`` includes on top of the ``torch/types.h`` that ``load_inline``
  puts first. Once per toolchain and C++ optimisation level, kz builds a *prelude*
  (:func:`build_prelude_into`): ``torch/extension.h`` precompiled with torch's own flags
  (gcc's precompiled header, found first through ``-I``), and the names that header
  declares beyond ``torch/types.h``. A build with a prelude compiles ``main.cpp`` against
  the precompiled header (gcc ignores one that does not fit the flags and reads the header:
  never a different result), and first tries ``cuda.cu`` *light*: each line that includes
  ``torch/extension.h`` blanked (line numbers unchanged). When the light ``cuda.cu`` fails
  on a name that only ``torch/extension.h`` declares (``py::``, ``torch::nn``), inside a
  header, or without a compiler error, it is compiled again as written
  (:func:`needs_extension_header`); an error on the candidate's own lines and names is
  reported from the light build. The record says which path built it (``path``). In the evaluator the prelude is a
  shared build like any other, made by kz's trusted builder from kz's own arguments
  (:func:`prelude_arguments`: an optimisation flag from an allow-list, never the
  candidate's text).

This module never runs a candidate's Python code: the child builds sources and loads the
built library, nothing else.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs

from kz_core import COMPILE_TIMEOUT_ENV, cache_dir, defer_build, deferring_builds, replace_file, shared_build
from kz_backend_cuda.checks import INLINE_BACKEND

#: Wall-clock seconds all ``load_inline`` builds of one candidate may take together where
#: no evaluator says otherwise; a cold build of a small extension takes about a minute
#: (most of it compiling torch's headers). In kz's workers: :func:`build_timeout_s`.
BUILD_TIMEOUT_S = 150.0
#: Seconds of ``eval.compile_timeout_s`` kept beyond the builds (so that a build past its
#: limit is reported as such, and the worker is not ended first).
TIMEOUT_MARGIN_S = 30.0


def build_timeout_s() -> float:
    """Seconds all ``load_inline`` builds of one candidate may take together:
    ``eval.compile_timeout_s`` (which ends the whole worker) less :data:`TIMEOUT_MARGIN_S`,
    so that a slow or busy machine given a longer compile timeout gives builds longer too
    (150 s with the default 180); :data:`BUILD_TIMEOUT_S` outside an evaluator's workers."""
    try:
        limit = float(os.environ.get(COMPILE_TIMEOUT_ENV, ""))
    except ValueError:
        return BUILD_TIMEOUT_S
    if not math.isfinite(limit) or limit <= 0:
        return BUILD_TIMEOUT_S
    return max(limit - TIMEOUT_MARGIN_S, limit / 2)
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
#: Whether builds use the prelude (precompiled ``torch/extension.h``, light ``cuda.cu``).
USE_PRELUDE = os.environ.get("KZ_INLINE_PRELUDE", "1") != "0"
#: The header the prelude precompiles, and its version (a new one is a new build key).
PRELUDE_HEADER = "torch/extension.h"
PRELUDE_VERSION = 1
#: The prelude's record in its folder, and the file of names it declares beyond torch/types.h.
PRELUDE_RECORD = "kz-prelude.json"
PRELUDE_NAMES = "extension-names.json"
#: C++ optimisation flags a prelude is built for (gcc uses a precompiled header only with
#: the optimisation level it was made with); other flags do not select a prelude.
OPTIMISATION_FLAGS = ("-O", "-O0", "-O1", "-O2", "-O3", "-Os", "-Og", "-Oz")
#: A line of a CUDA source that includes ``torch/extension.h`` (blanked by the light path).
_EXTENSION_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]torch/extension\.h[>"][ \t]*(//[^\n]*)?$', re.MULTILINE)


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
    :ivar path: how it was built: ``light`` (with the prelude, ``cuda.cu`` without
        ``torch/extension.h``), ``prelude`` (``main.cpp`` against the precompiled header,
        ``cuda.cu`` as written) or ``plain`` (torch's ``load_inline`` as it is).
    """

    status: str
    library: str = ""
    seconds: float = 0.0
    message: str = ""
    log: str = ""
    source_file: str = ""
    line: int | None = None
    cached: bool = False
    path: str = ""


@attrs.frozen
class Prelude:
    """A finished prelude (:func:`build_prelude_into`).

    :ivar folder: holds ``torch/extension.h`` and, when ``pch``, its precompiled header.
    :ivar pch: whether the precompiled header was made (gcc only).
    :ivar names: the identifiers ``torch/extension.h`` declares beyond ``torch/types.h``.
    """

    folder: Path
    pch: bool
    names: frozenset[str]


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


_NVCC_RELEASES: dict[str, str] = {}


def nvcc_release(cuda_home: str) -> str:
    """``13.0`` from ``nvcc --version`` (empty when it does not answer), asked up to three
    times and remembered once it answers: the release is part of every build's key, and a
    candidate worker that got no answer on a busy machine (a fork refused, a timeout) would
    look for kz's builds under another key than the builder made them."""
    if cuda_home in _NVCC_RELEASES:
        return _NVCC_RELEASES[cuda_home]
    for attempt in range(3):
        try:
            output = subprocess.run([os.path.join(cuda_home, "bin", "nvcc"), "--version"], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            output = ""
        match = re.search(r"release (\d+\.\d+)", output)
        if match:
            _NVCC_RELEASES[cuda_home] = match.group(1)
            return match.group(1)
        if attempt < 2:
            time.sleep(0.5 * (attempt + 1))
    return ""


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
        # nvcc's binary, not its answer to `nvcc --version`: every process that describes
        # the toolchain must give the same key, and a process on a busy machine whose
        # nvcc did not answer (a refused fork) gave an empty release, so that a candidate's
        # worker looked for kz's builds under another key than the builder made them.
        "nvcc": nvcc_fingerprint(tools.cuda_home),
        "cxx": os.environ.get("CXX", "c++"),
    }


def nvcc_fingerprint(cuda_home: str) -> str:
    """``bin/nvcc``'s real path, size and modification time (empty without a toolkit): a
    new nvcc is a new build key, and reading it needs no child process."""
    if not cuda_home:
        return ""
    try:
        path = os.path.realpath(os.path.join(cuda_home, "bin", "nvcc"))
        stat = os.stat(path)
    except OSError:
        return ""
    return f"{path}:{stat.st_size}:{stat.st_mtime_ns}"


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
    return located(folder, record)


def located(folder: Path, record: BuildRecord) -> BuildRecord | None:
    """``record`` with its library's full path: a built library is named relative to its
    folder (a shared build was made elsewhere and moved); ``None`` when that path leaves
    the folder or names no file."""
    if record.status != "built":
        return record
    library = (folder / record.library).resolve()
    if folder.resolve() not in library.parents or not library.is_file():
        return None
    return attrs.evolve(record, library=str(library))


def _write_record(folder: Path, record: BuildRecord) -> None:
    replace_file(folder / RECORD_NAME, json.dumps(attrs.asdict(record)))


# -- the prelude ------------------------------------------------------------------------------


def prelude_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """The build arguments of the prelude an extension's build uses: kz's own data, the
    header and the last optimisation flag of the extension's ``extra_cflags`` (one of
    :data:`OPTIMISATION_FLAGS`, or none)."""
    optimisation = ""
    flags = arguments.get("extra_cflags")
    for flag in flags if isinstance(flags, list) else []:
        for word in flag.split() if isinstance(flag, str) else []:
            if word in OPTIMISATION_FLAGS:
                optimisation = word
    return {"prelude": PRELUDE_HEADER, "version": PRELUDE_VERSION, "optimisation": optimisation}


def is_prelude(arguments: Any) -> bool:
    """Whether build arguments are a prelude's (:func:`prelude_arguments`)."""
    return isinstance(arguments, dict) and "prelude" in arguments


def read_prelude(folder: Path | None) -> Prelude | None:
    """The finished prelude in ``folder``, if there is a usable one."""
    if folder is None:
        return None
    try:
        data = json.loads((folder / PRELUDE_RECORD).read_text())
        names = json.loads((folder / PRELUDE_NAMES).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("status") != "built" or not isinstance(names, list):
        return None
    pch = bool(data.get("pch")) and (folder / (PRELUDE_HEADER + ".gch")).is_file() and (folder / PRELUDE_HEADER).is_file()
    return Prelude(folder, pch, frozenset(name for name in names if isinstance(name, str)))


def local_prelude(arguments: dict[str, Any], tools: Toolchain, timeout_s: float) -> Prelude | None:
    """The prelude of a build outside the evaluator's sandbox: from the shared folder when
    this process has one, else made once in the kz cache (``torch_extensions/prelude-<key>``)."""
    if not USE_PRELUDE or tools.problem:
        return None
    prelude = prelude_arguments(arguments)
    shared = shared_build(INLINE_BACKEND, prelude, identity(tools))
    if shared is not None:
        return read_prelude(shared)
    folder = build_folder("prelude-" + build_key(prelude, tools))
    found = read_prelude(folder)
    if found is not None or (folder / PRELUDE_RECORD).is_file():
        return found  # a prelude that could not be made is not tried again
    try:
        build_prelude_into(folder, prelude, tools, timeout_s)
    except InlineBuildError:
        return None
    return read_prelude(folder)


def light_sources(sources: Any) -> Any:
    """``cuda_sources`` with each line that includes ``torch/extension.h`` blanked (same
    shape, same line numbers), or ``None`` when no line does."""
    if isinstance(sources, str):
        light = _EXTENSION_INCLUDE.sub("", sources)
        return light if light != sources else None
    if isinstance(sources, list) and all(isinstance(source, str) for source in sources):
        lights = [_EXTENSION_INCLUDE.sub("", source) for source in sources]
        return lights if lights != sources else None
    return None


_QUOTED = re.compile(r'"([A-Za-z_]\w*)"')
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


_ERROR_LINE = re.compile(r"^(.*?)(?:\(\d+\)|:\d+:\d+):\s*(?:fatal |catastrophic )?error\b")


def needs_extension_header(log: str, names: frozenset[str]) -> bool:
    """Whether the errors of a light ``cuda.cu`` may come from its blanked includes, so that
    it must be compiled again as written: an error anywhere but in ``cuda.cu`` itself (in a
    header: a template that needed a declaration of ``torch/extension.h``), or one in
    ``cuda.cu`` that names (or whose quoted source line holds) an identifier that only
    ``torch/extension.h`` declares. Only errors in the candidate's own lines on names of
    its own are reported from the light build."""
    lines = log.splitlines()
    found = False
    for index, line in enumerate(lines):
        match = _ERROR_LINE.match(line)
        if match is None:
            continue
        found = True
        if not match.group(1).strip().endswith("cuda.cu"):
            return True
        if any(name in names for name in _QUOTED.findall(line)):
            return True
        context = lines[index + 1] if index + 1 < len(lines) else ""
        if any(name in names for name in _IDENTIFIER.findall(context)):
            return True
    return not found  # a failure without a compiler error: try it as written


def build_prelude_into(folder: Path, prelude: dict[str, Any], tools: Toolchain, timeout_s: float) -> BuildRecord:
    """Make the prelude of ``prelude`` (:func:`prelude_arguments`) in ``folder``, in a child
    process: a copy of ``torch/extension.h`` with its precompiled header (gcc; compiled
    with the flags torch gives ``main.cpp`` and the optimisation flag) and the names it
    declares beyond ``torch/types.h``. Its record is :data:`PRELUDE_RECORD`.

    :raises InlineBuildError: when the child runs past ``timeout_s`` or ends without a result.
    """
    optimisation = prelude.get("optimisation", "")
    if not is_prelude(prelude) or optimisation not in ("", *OPTIMISATION_FLAGS):
        return BuildRecord("failed", message=f"not a prelude kz builds: {json.dumps(prelude)[:200]}")
    request = {"prelude": prelude, "folder": str(folder), "cuda_home": tools.cuda_home, "mode": tools.mode}
    try:
        return _run_build(request, folder, tools, timeout_s, "the cuda_inline prelude")
    except InlineBuildError as exc:
        return _prelude_failed(folder, exc.message, 0.0)


def _prelude_failed(folder: Path, why: str, seconds: float) -> BuildRecord:
    """Record in ``folder`` that its prelude could not be made (builds go without one, and
    it is not tried again)."""
    record = BuildRecord("failed", seconds=seconds, message=f"the cuda_inline prelude could not be made here: {why}"[:2000])
    folder.mkdir(parents=True, exist_ok=True)
    replace_file(folder / PRELUDE_RECORD, json.dumps({"status": "failed", "message": record.message}))
    return record


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


#: Headers of CUDA's libraries, which toolkits install as components of their own (a
#: toolkit with nvcc alone lacks them): a candidate that includes one and does not find it
#: meets the machine's gap, not an error of its own.
CUDA_LIBRARY_HEADERS = re.compile(r"^(?:cublas|cusparse|curand|cufft|cusolver|cudnn|nccl|nvjpeg|npp|cutensor|nvshmem)\w*\.h$")


def toolkit_gap(log: str, cuda_home: str) -> str:
    """Why a build failed for want of a header that torch's or CUDA's own headers include,
    or of a CUDA library's header that the candidate includes (an incomplete toolkit, or
    torch built without CUDA: not the candidate's fault), or ""."""
    import torch

    torch_headers = os.path.join(os.path.dirname(torch.__file__), "include")
    for pattern in _MISSING_HEADER:
        for match in pattern.finditer(log):
            including, header = match.group(1), match.group(2)
            if including.startswith(torch_headers) and not torch.version.cuda and header.startswith(("c10/", "ATen/", "torch/", "caffe2/")):
                where = f"torch {torch.__version__}, a build without CUDA, which does not ship the CUDA headers of torch's CUDA builds"
            elif including.startswith((torch_headers, cuda_home or "/nonexistent")):
                where = f"the CUDA toolkit at {cuda_home}"
            elif CUDA_LIBRARY_HEADERS.match(header):
                where = f"the CUDA toolkit at {cuda_home}, which lacks that CUDA library's headers"
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
    :param timeout_s: how long the child may take (its prelude's first build included).
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
            return _from_cache(record, tools)
    if deferring_builds():
        if USE_PRELUDE:
            prelude = prelude_arguments(arguments)
            folder = shared_build(INLINE_BACKEND, prelude, identity(tools))
            if folder is not None and not (folder / PRELUDE_RECORD).is_file():
                defer_build(INLINE_BACKEND, prelude, last=False, optional=True)  # made first; without it, a plain build
        defer_build(INLINE_BACKEND, arguments)  # kz's trusted builder builds it; raises BuildDeferred
    started = time.monotonic()
    prelude_found = local_prelude(arguments, tools, timeout_s)
    folder = build_folder(build_key(arguments, tools))
    record = build_into(folder, arguments, tools, timeout_s - (time.monotonic() - started), prelude_found)
    found = located(folder, record)  # a fresh build names its library relative to the folder, as the record it wrote does
    if found is None:
        raise InlineBuildError(f"load_inline: the build of {arguments.get('name', '?')!r} reported a library that is not in its folder ({record.library})")
    return found


def build_shared(arguments: dict[str, Any], folder: str, device: str) -> dict[str, Any]:
    """``BackendInfo.builder`` of ``cuda_inline``: build ``arguments`` (an extension's, or a
    prelude's) into ``folder`` in kz's trusted builder (a fresh worker that ran no candidate
    code); the record, as data. An extension's build uses its prelude from the shared
    folder when it is there."""
    tools = toolchain(device)
    if tools.problem:
        return attrs.asdict(BuildRecord("unavailable", message=tools.problem))
    try:
        if is_prelude(arguments):
            record = build_prelude_into(Path(folder), arguments, tools, build_timeout_s())
        else:
            prelude = shared_build(INLINE_BACKEND, prelude_arguments(arguments), identity(tools)) if USE_PRELUDE else None
            record = build_into(Path(folder), arguments, tools, build_timeout_s(), read_prelude(prelude))
    except InlineBuildError as exc:
        if exc.unavailable:
            return attrs.asdict(BuildRecord("unavailable", message=exc.message, log=exc.log))
        # It did not finish (past its time on a busy machine, or the child died): nothing
        # of it may be shared, or its key would name an unfinished folder for good.
        return {**attrs.asdict(BuildRecord("failed", message=exc.message, log=exc.log)), "retry": True}
    return attrs.asdict(record)


def _from_cache(record: BuildRecord, tools: Toolchain) -> BuildRecord:
    """A finished build's record read back; a failure that, judged by this kz, was the
    machine's gap (a record written by a kz that judged fewer headers so) is raised as
    such, never replayed as the candidate's compiler error."""
    gap = toolkit_gap(record.log, tools.cuda_home) if record.status == "failed" and record.log else ""
    if gap:
        raise InlineBuildError(gap, log=record.log, unavailable=True)
    return attrs.evolve(record, cached=True)


def build_into(folder: Path, arguments: dict[str, Any], tools: Toolchain, timeout_s: float, prelude: Prelude | None = None) -> BuildRecord:
    """:func:`build` in ``folder`` (its record there, if finished, is the result), with
    ``prelude`` when there is one."""
    record = read_record(folder)
    if record is not None:
        return _from_cache(record, tools)
    request = {"arguments": arguments, "folder": str(folder), "cuda_home": tools.cuda_home, "mode": tools.mode, "prelude": str(prelude.folder) if prelude else ""}
    record = _run_build(request, folder, tools, timeout_s, f"extension {arguments.get('name', '?')!r}")
    if record.status == "unavailable":
        raise InlineBuildError(record.message, log=record.log, unavailable=True)
    return record


def _run_build(request: dict[str, Any], folder: Path, tools: Toolchain, timeout_s: float, what: str) -> BuildRecord:
    """Run the build child on ``request`` in ``folder``; its record."""
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kz-inline-") as scratch:
        request_path = Path(scratch) / "request.json"
        result = Path(scratch) / "result.json"
        output = Path(scratch) / "output.log"
        request_path.write_text(json.dumps(request))
        started = time.perf_counter()
        try:
            status = run_child([*BUILD_COMMAND, str(request_path), str(result)], child_environment(tools), timeout_s, output, folder)
        except BuildTimeout:
            raise InlineBuildError(
                f"load_inline: building {what} ran past the cuda_inline build timeout "
                f"({build_timeout_s():g} s for all of a candidate's builds: eval.compile_timeout_s less {TIMEOUT_MARGIN_S:g} s); killed after {max(timeout_s, 0):.1f} s",
                log=readable_log(output.read_text(errors="replace"), folder)[-4000:],
            ) from None
        if not result.is_file():
            tail = output.read_text(errors="replace")[-4000:]
            raise InlineBuildError(f"load_inline: the build of {what} exited with status {status} without a result", log=tail)
        record = BuildRecord(**json.loads(result.read_text()))
    return attrs.evolve(record, seconds=record.seconds or time.perf_counter() - started)


# -- the child ---------------------------------------------------------------------------------


def _child_build(arguments: dict[str, Any], folder: Path, cuda_home: str, mode: str, prelude: Prelude | None = None) -> BuildRecord:
    """Build ``arguments`` in ``folder`` (inside the child): with ``prelude``, ``main.cpp``
    against its precompiled header and ``cuda.cu`` light first (again as written when
    :func:`needs_extension_header` says the light one's failure may come from the blanked
    includes); else torch's ``load_inline`` as it is."""
    if prelude is None:
        return attrs.evolve(_child_load_inline(arguments, folder, cuda_home, mode), path="plain")
    faster = dict(arguments)
    flags = arguments.get("extra_cflags")
    if prelude.pch and (flags is None or isinstance(flags, list)):
        # -I folders come before torch's -isystem ones: main.cpp's #include <torch/extension.h>
        # finds the prelude's copy and its precompiled header next to it.
        faster["extra_cflags"] = [*(flags or []), f"-I{prelude.folder}"]
    light = light_sources(arguments.get("cuda_sources"))
    if light is not None:
        record = _child_load_inline({**faster, "cuda_sources": light}, folder, cuda_home, mode)
        if record.status != "failed" or not needs_extension_header(record.log, prelude.names):
            return attrs.evolve(record, path="light")
        _forget_extension(str(arguments.get("name", "")))
    record = _child_load_inline(faster, folder, cuda_home, mode)
    return attrs.evolve(record, path="prelude" if faster != arguments else "plain")


def _forget_extension(name: str) -> None:
    """Make torch build ``name`` again under its own name (not ``name_v1``): its extension
    versioner counts every build of a name in this process."""
    from torch.utils import cpp_extension

    with contextlib.suppress(AttributeError, TypeError):
        cpp_extension.JIT_EXTENSION_VERSIONER.entries.pop(name, None)


def _child_load_inline(arguments: dict[str, Any], folder: Path, cuda_home: str, mode: str) -> BuildRecord:
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


def _torch_flags(cuda_home: str, optimisation: str) -> tuple[str, list[str]]:
    """The C++ compiler and the flags torch's ``load_inline`` gives ``main.cpp`` here (from
    the ninja file torch itself writes), without the extension's name, with
    ``optimisation`` last."""
    import inspect

    from torch.utils import cpp_extension

    if cpp_extension.CUDA_HOME is None:
        cpp_extension.CUDA_HOME = cuda_home  # torch without CUDA: nvcc's headers all the same
    write = cpp_extension._write_ninja_file_to_build_library  # noqa: SLF001 - torch's own flags, exactly
    with tempfile.TemporaryDirectory(prefix="kz-prelude-") as scratch:
        ninja = Path(scratch) / "build.ninja"
        sources = [str(Path(scratch) / "main.cpp"), str(Path(scratch) / "cuda.cu")]
        given = {
            "path": str(ninja), "name": "kz_prelude", "sources": sources, "extra_cflags": [optimisation] if optimisation else [],
            "extra_cuda_cflags": [], "extra_sycl_cflags": [], "extra_ldflags": [], "extra_include_paths": [],
            "with_cuda": True, "with_sycl": False, "is_standalone": False,
        }
        write(**{key: value for key, value in given.items() if key in inspect.signature(write).parameters})
        text = ninja.read_text()
    values = dict(re.findall(r"^(cxx|cflags) = (.*)$", text, re.MULTILINE))
    flags = [flag for flag in shlex.split(values.get("cflags", "")) if not flag.startswith("-DTORCH_EXTENSION_NAME=")]
    return values.get("cxx", "c++"), flags


def _child_prelude(prelude: dict[str, Any], folder: Path, cuda_home: str) -> BuildRecord:
    """Make a prelude in ``folder`` (inside the child): its record is written there either way
    (one that could not be made is not tried again)."""
    import torch

    started = time.perf_counter()
    optimisation = str(prelude.get("optimisation", ""))
    try:
        compiler, flags = _torch_flags(cuda_home, optimisation)
        header = Path(torch.__file__).parent / "include" / PRELUDE_HEADER
        copy = folder / PRELUDE_HEADER
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(header.read_bytes())
        names = {}
        for name, include in (("extension", PRELUDE_HEADER), ("types", "torch/types.h")):
            done = subprocess.run(
                [*shlex.split(compiler), "-E", "-P", "-x", "c++", *flags, "-"], input=f"#include <{include}>\n", capture_output=True, text=True, timeout=build_timeout_s()
            )
            if done.returncode != 0:
                raise RuntimeError(f"preprocessing {include} failed: {readable_log(done.stderr, folder)[-2000:]}")
            names[name] = set(re.findall(r"[A-Za-z_]\w*", done.stdout))
        extension_only = sorted(names["extension"] - names["types"])
        pch = False
        version = subprocess.run([*shlex.split(compiler), "--version"], capture_output=True, text=True, timeout=60).stdout
        if "clang" not in version.lower():
            # gcc: a precompiled header next to the copy is what #include <torch/extension.h> finds.
            done = subprocess.run(
                [*shlex.split(compiler), "-x", "c++-header", str(copy), "-o", str(copy) + ".gch", *flags], capture_output=True, text=True, timeout=build_timeout_s()
            )
            pch = done.returncode == 0
    except Exception as exc:  # noqa: BLE001 - torch's internals or the compiler: no prelude, plain builds
        return _prelude_failed(folder, f"{type(exc).__name__}: {exc}", time.perf_counter() - started)
    replace_file(folder / PRELUDE_NAMES, json.dumps(extension_only))
    seconds = time.perf_counter() - started
    message = f"{len(extension_only)} names beyond torch/types.h; " + ("torch/extension.h precompiled" if pch else "no precompiled header (not gcc, or it failed)")
    replace_file(folder / PRELUDE_RECORD, json.dumps({"status": "built", "pch": pch, "seconds": seconds, "optimisation": optimisation, "message": message}))
    return BuildRecord("built", seconds=seconds, message=message, path="prelude")


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
        if "prelude" in request and is_prelude(request["prelude"]):
            found = read_prelude(folder)  # made by another process while this one waited
            record = BuildRecord("built", cached=True, path="prelude") if found else _child_prelude(request["prelude"], folder, request["cuda_home"])
            Path(argv[1]).write_text(json.dumps(attrs.asdict(record)))
            return 0
        record = read_record(folder)
        if record is None:
            # Holding the lock, nobody else builds here: a baton torch left behind when a
            # build was killed is stale.
            (folder / "lock").unlink(missing_ok=True)
            prelude = read_prelude(Path(request["prelude"])) if request.get("prelude") else None
            record = _child_build(request["arguments"], folder, request["cuda_home"], request["mode"], prelude)
            if record.status != "unavailable":
                _write_record(folder, record)
        else:
            record = attrs.evolve(record, cached=True)
    Path(argv[1]).write_text(json.dumps(attrs.asdict(record)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
