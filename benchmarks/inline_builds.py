"""Cold ``cuda_inline`` builds: torch's plain ``load_inline`` against kz's prelude path.

For each KernelBench-format candidate (a file whose ``load_inline(...)`` call has literal
arguments, or names module-level string constants), the same arguments are built twice by
``kz_backend_cuda.inline_build.build`` (the code the evaluator's trusted builder runs),
each time into a fresh kz cache:

- ``plain``: the prelude switched off (``KZ_INLINE_PRELUDE=0``): torch's ``load_inline`` as
  it is, ``main.cpp`` and ``cuda.cu`` both reading all of ``torch/extension.h``;
- ``prelude``: the prelude made once first (its time is reported on its own: once per
  toolchain and C++ optimisation level, then kept in the kz cache), then each candidate's
  extension built with it (``main.cpp`` against the precompiled header, ``cuda.cu`` light,
  again as written when it needs ``torch/extension.h``); the row says which path built it.

Then each is built once more on the prelude cache: the persistent cache's answer (``cached``).
On a machine whose torch has no CUDA (a CPU wheel) both build ``checked`` (compiled, not
linked): the compile time is the build time that matters, and a source that includes CUDA
headers torch's CPU wheel lacks (``c10/cuda/...``) cannot be measured there (``unavailable``).
Builds run one after another (``MAX_JOBS`` compiler processes each, 2 by default). Usage:

    python benchmarks/inline_builds.py --out results/inline_builds.json                 # the examples
    python benchmarks/inline_builds.py --sources DIR_OR_FILE ... --out results/x.json    # your candidates
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
from cuda_compile import _call, _constants, _value  # noqa: E402 - how cuda_compile reads load_inline calls

REPO = Path(__file__).resolve().parents[1]
ARGUMENTS = ("name", "cpp_sources", "cuda_sources", "functions", "extra_cflags", "extra_cuda_cflags", "extra_ldflags", "extra_include_paths")
#: Wall-clock limit of one build's process, seconds (a cold build on a 2-core machine takes minutes).
TIMEOUT_S = 1500


def inline_arguments(path: Path) -> dict[str, Any]:
    """The first ``load_inline`` call's arguments in ``path``, read without running it."""
    tree = ast.parse(path.read_text())
    constants = _constants(tree)
    call = _call(tree, "load_inline")
    given: dict[str, ast.AST] = dict(zip(("name", "cpp_sources", "cuda_sources"), call.args))
    given.update({keyword.arg: keyword.value for keyword in call.keywords if keyword.arg in ARGUMENTS})
    return {key: _value(value, constants) for key, value in given.items()}


def sources(given: list[str]) -> list[Path]:
    paths: list[Path] = []
    for item in given:
        path = Path(item)
        paths += sorted(path.glob("*.py")) if path.is_dir() else [path]
    return paths


def measure(arguments_file: str, prelude_mode: str) -> dict[str, Any]:
    """Inside a measuring process: build one extension (or the prelude), timed."""
    from kz_backend_cuda import inline_build

    tools = inline_build.toolchain("cuda:0")
    if tools.problem:
        return {"status": "unavailable", "message": tools.problem}
    arguments = json.loads(Path(arguments_file).read_text())
    started = time.perf_counter()
    if prelude_mode == "make":
        prelude = inline_build.prelude_arguments(arguments)
        folder = inline_build.build_folder("prelude-" + inline_build.build_key(prelude, tools))
        record = inline_build.build_prelude_into(folder, prelude, tools, TIMEOUT_S)
    else:
        try:
            record = inline_build.build(arguments, tools, TIMEOUT_S)
        except inline_build.InlineBuildError as exc:
            return {"status": "unavailable" if exc.unavailable else "error", "message": exc.message, "seconds": time.perf_counter() - started}
    return {"status": record.status, "path": record.path, "cached": record.cached, "message": record.message[:300], "seconds": time.perf_counter() - started}


def run(arguments: dict[str, Any], cache: Path, prelude: bool, make_prelude: bool = False) -> dict[str, Any]:
    """One build in a fresh process on the kz cache ``cache``."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(arguments, handle)
    env = {**os.environ, "KZ_CACHE_DIR": str(cache), "KZ_INLINE_PRELUDE": "1" if prelude else "0"}
    command = [sys.executable, str(Path(__file__).resolve()), "--measure", handle.name, "--prelude", "make" if make_prelude else "use"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=TIMEOUT_S + 60)
    except subprocess.TimeoutExpired:
        return {"status": "error", "message": f"timed out after {TIMEOUT_S + 60} s"}
    finally:
        os.unlink(handle.name)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"status": "error", "message": (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1][:300]}
    return json.loads(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", nargs="+", default=[str(REPO / "examples" / "candidates" / "cuda_inline")], help="candidate files or folders of them")
    parser.add_argument("--out", default=None, help="also write the JSON here")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--prelude", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.prelude)))
        return

    import torch

    from kz_backend_cuda.inline_build import toolchain

    tools = toolchain("cuda:0")
    report: dict[str, Any] = {
        "benchmark": "inline_builds",
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "cpus": os.cpu_count(),
        "max_jobs": os.environ.get("MAX_JOBS", "2"),
        "toolchain": {"nvcc": tools.nvcc, "arch_list": tools.arch_list, "torch_cuda": tools.torch_cuda or "(CPU build: compiled, not linked)", "problem": tools.problem},
        "versions": versions(),
        "preludes": [],
        "results": [],
    }
    with tempfile.TemporaryDirectory(prefix="kz-inline-builds-") as scratch:
        plain_cache, prelude_cache = Path(scratch) / "plain", Path(scratch) / "prelude"
        made: set[str] = set()
        for path in sources(args.sources):
            try:
                arguments = inline_arguments(path)
            except (LookupError, SyntaxError, ValueError, KeyError) as exc:
                report["results"].append({"source": path.name, "error": f"arguments not readable: {exc}"})
                continue
            from kz_backend_cuda.inline_build import prelude_arguments

            optimisation = prelude_arguments(arguments)["optimisation"]
            if optimisation not in made:
                made.add(optimisation)
                result = run(arguments, prelude_cache, True, make_prelude=True)
                report["preludes"].append({"optimisation": optimisation or "(none)", **result})
                print(f"prelude {optimisation or '(none)'}: {result.get('status')} {result.get('seconds', 0):.1f} s {result.get('message', '')}", file=sys.stderr)
            plain = run(arguments, plain_cache / path.stem, False)
            fast = run(arguments, prelude_cache, True)
            cached = run(arguments, prelude_cache, True)
            row = {"source": path.name, "plain": plain, "prelude": fast, "cached": cached}
            if plain.get("status") in ("built", "checked") and fast.get("status") == plain.get("status"):
                row["speedup"] = round(plain["seconds"] / fast["seconds"], 2)
            report["results"].append(row)
            print(f"{path.name}: plain {_shown(plain)}; prelude {_shown(fast)}; cached {_shown(cached)}", file=sys.stderr)
            if args.out:
                Path(args.out).parent.mkdir(parents=True, exist_ok=True)
                Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    speedups = [row["speedup"] for row in report["results"] if "speedup" in row]
    report["median_speedup"] = round(statistics.median(speedups), 2) if speedups else None
    print_table(report)
    write_json(args.out, report)


def _shown(result: dict[str, Any]) -> str:
    seconds = f"{result['seconds']:.1f} s " if "seconds" in result else ""
    return f"{seconds}{result.get('status')}{' (' + result['path'] + ')' if result.get('path') else ''}"


def print_table(report: dict[str, Any]) -> None:
    for prelude in report["preludes"]:
        print(f"prelude {prelude['optimisation']}: {prelude.get('status')}, {prelude.get('seconds', 0):.1f} s ({prelude.get('message', '')})")
    print(f"{'source':34} {'plain s':>8} {'prelude s':>10} {'path':>8} {'cached s':>9} {'speedup':>8}  status")
    for row in report["results"]:
        if "error" in row:
            print(f"{row['source']:34} {'-':>8} {'-':>10} {'-':>8} {'-':>9} {'-':>8}  {row['error']}")
            continue
        plain, fast, cached = row["plain"], row["prelude"], row["cached"]
        status = plain.get("status") if plain.get("status") == fast.get("status") else f"{plain.get('status')} / {fast.get('status')}"
        notes = "" if status in ("built", "checked") else f": {plain.get('message') or fast.get('message')}"
        print(
            f"{row['source']:34} {plain.get('seconds', 0):>8.1f} {fast.get('seconds', 0):>10.1f} {fast.get('path', '-'):>8} "
            f"{cached.get('seconds', 0):>9.2f} {row.get('speedup', '-'):>8}  {status}{notes}"
        )
    print(f"median speedup: {report.get('median_speedup')}")


if __name__ == "__main__":
    main()
