"""Compile-and-load latency of the same CUDA kernels: NVRTC (the kz CUDA API) against
``torch.utils.cpp_extension.load_inline``, cold and cached; and NVRTC compiling alone on the
CPU (no GPU needed).

The kernels are the example problems' (``examples/candidates/cuda/`` and
``examples/candidates/cuda_inline/``: vector add, scaled ReLU, row sum), read from the
candidates' source without running them. Every measurement runs in a fresh Python process,
one after another (never in parallel: this measures latency), so that no in-process cache
helps; the clock starts after torch is imported and the CUDA context exists:

- ``nvrtc-cpu``: ``compile_source`` to a cubin, GPU hidden (``CUDA_VISIBLE_DEVICES=""``);
- ``nvrtc``: ``load_cuda`` (NVRTC compile) and loading the cubin into the GPU's context;
- ``load_inline``: ``load_inline`` (nvcc and the host compiler through ninja, link, import).

``cold`` uses a fresh cache folder (``KZ_CACHE_DIR`` or ``build_directory``), ``--repeats``
times; ``cached`` is one new process on the folder the last cold run filled. A failing
measurement is recorded with its error and the others go on; the JSON is rewritten after
every kernel, so a run stopped by a time limit keeps what it finished. A cold load_inline
build takes about a minute, so ``--inline-kernels`` (default 1) bounds how many kernels it
builds. Usage:

    python benchmarks/cuda_compile.py --out results/cuda_compile.json      # GPU: about 2.5 minutes
    python benchmarks/cuda_compile.py --inline-kernels 2 --repeats 3       # GPU: about 4 minutes
    python benchmarks/cuda_compile.py                                      # CPU: NVRTC alone
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import versions, write_json  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
KERNELS = ("1_vector_add", "2_scaled_relu", "4_row_sum")
INLINE_ARGUMENTS = ("name", "cpp_sources", "cuda_sources", "functions", "extra_cflags", "extra_cuda_cflags")
#: Wall-clock limit of one measurement's process, seconds.
TIMEOUTS = {"nvrtc-cpu": 120, "nvrtc": 120, "load_inline": 400}


# -- the kernels' sources ------------------------------------------------------------------------


def _constants(tree: ast.Module) -> dict[str, Any]:
    """Module-level ``NAME = <literal>`` assignments."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return found


def _call(tree: ast.Module, function: str) -> ast.Call:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == function:
            return node
    raise LookupError(f"no call of {function}")


def _value(node: ast.AST, constants: dict[str, Any]) -> Any:
    return constants[node.id] if isinstance(node, ast.Name) else ast.literal_eval(node)


def nvrtc_source(problem: str) -> str:
    """The CUDA source the ``cuda`` example candidate passes to ``load_cuda``."""
    tree = ast.parse((REPO / "examples" / "candidates" / "cuda" / f"{problem}.py").read_text())
    return _value(_call(tree, "load_cuda").args[0], _constants(tree))


def inline_arguments(problem: str) -> dict[str, Any]:
    """The ``load_inline`` arguments of the ``cuda_inline`` example candidate."""
    tree = ast.parse((REPO / "examples" / "candidates" / "cuda_inline" / f"{problem}.py").read_text())
    constants = _constants(tree)
    call = _call(tree, "load_inline")
    return {k.arg: _value(k.value, constants) for k in call.keywords if k.arg in INLINE_ARGUMENTS}


# -- one measurement (in its own process) ---------------------------------------------------------


def measure(method: str, problem: str, cache: str) -> dict[str, Any]:
    """Run inside the measuring process: compile (and load) one kernel, timed."""
    import torch

    if method == "nvrtc-cpu":
        from kz_backend_cuda.nvrtc import DEFAULT_ARCH, compile_source

        source = nvrtc_source(problem)
        started = time.perf_counter()
        compiled = compile_source(source, arch=os.environ.get("KZ_CUDA_ARCH", DEFAULT_ARCH))
        return {"seconds": time.perf_counter() - started, "cache_hit": compiled.cached, "arch": compiled.arch}
    torch.cuda.init()
    torch.empty(1, device="cuda")  # the context exists before the clock starts
    device = torch.cuda.current_device()
    if method == "nvrtc":
        from kz_backend_cuda import load_cuda

        source = nvrtc_source(problem)
        started = time.perf_counter()
        module = load_cuda(source)
        module.loaded(device)  # the cubin in the GPU's context
        torch.cuda.synchronize()
        return {"seconds": time.perf_counter() - started, "cache_hit": module.compiled.cached, "arch": module.compiled.arch}
    if method == "load_inline":
        from torch.utils.cpp_extension import load_inline

        arguments = inline_arguments(problem)
        Path(cache).mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        module = load_inline(**arguments, build_directory=cache, verbose=False)
        torch.cuda.synchronize()
        return {"seconds": time.perf_counter() - started, "library": str(module.__file__), "arch": os.environ.get("TORCH_CUDA_ARCH_LIST", "")}
    raise ValueError(f"unknown method {method!r}")


def run_measurement(method: str, problem: str, cache: Path, env: dict[str, str]) -> dict[str, Any]:
    """One measurement in a fresh process; its failure is a result, not an exception."""
    command = [sys.executable, str(Path(__file__).resolve()), "--measure", method, "--kernel", problem, "--cache", str(cache)]
    started = time.perf_counter()
    try:
        completed = subprocess.run(command, capture_output=True, text=True, env=env, timeout=TIMEOUTS[method])
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {TIMEOUTS[method]} s"}
    wall = time.perf_counter() - started
    lines = [line for line in completed.stdout.splitlines() if line.startswith("{")]
    if completed.returncode != 0 or not lines:
        return {"error": (completed.stderr.strip().splitlines() or [f"exit status {completed.returncode}"])[-1][:300]}
    return {**json.loads(lines[-1]), "process_wall_s": round(wall, 3)}


# -- the benchmark ---------------------------------------------------------------------------------


def plan(args: argparse.Namespace, gpu: bool) -> list[tuple[str, str, int, str]]:
    """``(method, kernel, repeats, why skipped)`` for every cell of the table."""
    cells = [("nvrtc-cpu", problem, args.repeats, "") for problem in KERNELS]
    no_gpu = "" if gpu else "no CUDA GPU here"
    cells += [("nvrtc", problem, args.repeats, no_gpu) for problem in KERNELS]
    inline_skip = no_gpu or inline_problem()
    cells += [("load_inline", problem, 1, inline_skip) for problem in KERNELS[: args.inline_kernels]]
    return cells


def inline_problem() -> str:
    """Why load_inline cannot build here (no nvcc, no ninja), or ""."""
    from kz_backend_cuda.inline_build import toolchain

    return toolchain("cuda:0").problem


def summarise(samples: list[dict[str, Any]]) -> dict[str, Any]:
    seconds = [s["seconds"] for s in samples if "seconds" in s]
    errors = [s["error"] for s in samples if "error" in s]
    if not seconds:
        return {"n": 0, "errors": errors}
    return {"median_s": round(statistics.median(seconds), 4), "min_s": round(min(seconds), 4), "max_s": round(max(seconds), 4), "n": len(seconds), "errors": errors}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inline-kernels", type=int, default=1, help="kernels built with load_inline, cold once each (a cold build takes about a minute)")
    parser.add_argument("--repeats", type=int, default=2, help="cold measurements per NVRTC kernel (one cached measurement follows)")
    parser.add_argument("--out", default=None, help="also write the JSON here")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--kernel", help=argparse.SUPPRESS)
    parser.add_argument("--cache", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:  # inside a measuring process
        print(json.dumps(measure(args.measure, args.kernel, args.cache)))
        return

    import torch

    from kz_backend_cuda.inline_build import build_path

    gpu = torch.cuda.is_available()
    arch = ""
    if gpu:
        major, minor = torch.cuda.get_device_capability(0)
        arch = f"{major}.{minor}"
    report: dict[str, Any] = {
        "benchmark": "cuda_compile",
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "device": torch.cuda.get_device_name(0) if gpu else "cpu",
        "torch_cuda_arch_list": arch or "(none: no GPU)",
        "versions": {**versions(), "nvcc": nvcc_release()},
        "results": [],
    }
    rows = report["results"]
    with tempfile.TemporaryDirectory(prefix="kz-cuda-compile-") as scratch:
        for number, (method, problem, repeats, skipped) in enumerate(plan(args, gpu)):
            row: dict[str, Any] = {"method": method, "kernel": problem}
            if skipped:
                rows.append({**row, "skipped": skipped})
                print(f"{method:12} {problem:14} skipped: {skipped}", file=sys.stderr)
                continue
            env = dict(os.environ)
            # PATH: torch runs ninja from it; the ninja package's folder may not be on it.
            env["PATH"] = build_path()
            if method == "nvrtc-cpu":
                env["CUDA_VISIBLE_DEVICES"] = ""
            if arch:
                env["TORCH_CUDA_ARCH_LIST"] = arch  # one architecture, as NVRTC compiles for
            row["cold"] = []
            for sample in range(repeats):
                cache = Path(scratch) / f"{number}-{sample}"
                env.update(KZ_CACHE_DIR=str(cache / "kz"), TORCH_EXTENSIONS_DIR=str(cache / "torch"))
                row["cold"].append(run_measurement(method, problem, cache / "build", env))
                print(f"{method:12} {problem:14} cold   {_shown(row['cold'][-1])}", file=sys.stderr)
            row["cached"] = [run_measurement(method, problem, cache / "build", env)]  # a new process, the last cold run's folder
            print(f"{method:12} {problem:14} cached {_shown(row['cached'][-1])}", file=sys.stderr)
            row["cold_summary"], row["cached_summary"] = summarise(row["cold"]), summarise(row["cached"])
            rows.append(row)
            if args.out:  # a run stopped by a time limit keeps what it finished
                Path(args.out).parent.mkdir(parents=True, exist_ok=True)
                Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print_table(rows)
    write_json(args.out, report)


def _shown(sample: dict[str, Any]) -> str:
    return f"{sample['seconds']:.3f} s" if "seconds" in sample else f"error: {sample.get('error')}"


def nvcc_release() -> str:
    try:
        from kz_backend_cuda.inline_build import find_cuda_home, nvcc_release as release

        home = find_cuda_home()
        return release(home) if home else "absent"
    except ImportError:
        return "absent"


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'method':12} {'kernel':14} {'cold median s':>14} {'cached median s':>16} {'n':>3}  notes")
    for row in rows:
        if "skipped" in row:
            print(f"{row['method']:12} {row['kernel']:14} {'-':>14} {'-':>16} {0:>3}  skipped: {row['skipped']}")
            continue
        cold, cached = row["cold_summary"], row["cached_summary"]
        errors = "; ".join(dict.fromkeys(cold["errors"] + cached["errors"]))
        print(f"{row['method']:12} {row['kernel']:14} {cold.get('median_s', '-'):>14} {cached.get('median_s', '-'):>16} {cold['n']:>3}  {errors}")


if __name__ == "__main__":
    main()
