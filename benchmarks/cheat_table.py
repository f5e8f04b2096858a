"""The cheat suite as a table per attack class: every file of tests/cheats/ evaluated once,
with its verdict and the check that decided it (docs/security.md keeps the output).

Cheats marked ``gpu_only`` run only with ``--device cuda``; ``cuda`` and ``cuda_inline``
cheats need a GPU to be judged at all. Usage:

    python benchmarks/cheat_table.py --device cpu
    python benchmarks/cheat_table.py --device cuda --out results/cheats.json
"""

from __future__ import annotations

import argparse
import collections
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
# The cheats' headers are read as the test suite reads them (one parser: a copy here once
# missed the `needs` key its twin lacked too).
sys.path.insert(1, str(REPO / "tests" / "evaluate"))
from common import versions, write_json  # noqa: E402
from conftest import cheat_header, cheat_needs_met  # noqa: E402

CLASSES = {
    "1": "rewriting the measuring code in-process",
    "2": "reading the harness's secrets",
    "3": "contaminating later candidates",
    "4": "tampering with state on disk",
    "5": "escaping or attacking process control",
    "6": "exploiting the timing structure",
    "7": "work the evidence cannot see",
    "8": "replies that break the judge",
    "": "earlier cheats (guards of the first evaluator)",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default=None)
    parser.add_argument("--skip-destructive", action="store_true", help="leave out cheats that harm a machine without the sandbox (for evaluators older than it)")
    args = parser.parse_args()

    from kz_core.config import load_config
    from kz_core.evaluate import Evaluator
    from kz_core.evaluate.judge import INFRASTRUCTURE_CHECKS
    from kz_core.model import Candidate, Severity
    from kz_core.problems import load_problems

    gpu = args.device.startswith("cuda")
    candidates, headers = [], {}
    lacking: list[str] = []  # cheats whose defence this machine does not give
    for path in sorted((REPO / "tests" / "cheats").glob("*/*.py")):
        header = cheat_header(path)
        backend = header["backend"]
        if not gpu and (header.get("gpu_only") == "true" or backend != "triton"):
            continue
        if args.skip_destructive and header.get("destructive") == "true":
            continue
        name = f"{path.parent.name}/{path.stem}"
        if not cheat_needs_met(path):
            lacking.append(f"{name} (needs {header['needs']})")  # a flood with nothing to stop it harms the machine
            continue
        headers[name] = header
        candidates.append(Candidate(header["problem"], backend, path.read_text(), sample_id=name))
    config = load_config(None, [f"eval.device={args.device}", f"eval.workers={args.workers}", "eval.cache=false", "eval.baselines=[eager]"]).eval
    started = time.perf_counter()

    def table_row(result: Any) -> dict[str, Any]:
        header = headers[result.sample_id]
        decisive = next((f.check for f in result.findings if f.severity is Severity.ERROR), "")
        return {
            "cheat": result.sample_id,
            "class": header.get("class", ""),
            "verdict": result.verdict.value,
            "check": decisive,
            "expected": header["expect"],
            # kz failing to evaluate it (``not_run``, ``reference_error``...) is no catch: a
            # table where every worker failed to start read as every cheat caught
            "caught": result.verdict.value != "correct" and decisive not in INFRASTRUCTURE_CHECKS,
            "kz_failed": decisive in INFRASTRUCTURE_CHECKS,
        }

    finished: list[dict[str, Any]] = []
    lock = threading.Lock()

    def save(result: Any) -> None:
        # Each row as it is judged (a run cut by a time limit keeps what it finished),
        # marked cut until the table is whole.
        with lock:
            finished.append(table_row(result))
            if args.out:
                write_json(args.out, {"benchmark": "cheat_table", "device": args.device, "cut": True, "of": len(candidates), "rows": finished}, quiet=True)

    with Evaluator(load_problems("examples").problems, config) as evaluator:
        results = evaluator.evaluate(candidates, progress=save)
        sandbox = getattr(evaluator, "isolation", None)
        isolation = sandbox.summary() if sandbox is not None else "none (an evaluator without the sandbox)"
    rows = [table_row(result) for result in results]
    by_class = collections.defaultdict(list)
    for row in rows:
        by_class[row["class"]].append(row)
    print(f"device {args.device}; isolation: {isolation}; {len(rows)} cheats in {time.perf_counter() - started:.0f} s")
    for number in sorted(by_class, key=lambda c: (c == "", c)):
        print(f"\n**Class {number or '-'}: {CLASSES.get(number, '')}**\n")
        print("| cheat | verdict | decided by |")
        print("| --- | --- | --- |")
        for row in sorted(by_class[number], key=lambda r: r["cheat"]):
            print(f"| `{row['cheat']}` | {row['verdict']} | {row['check']} |")
    missed = [row["cheat"] for row in rows if not row["caught"] and not row["kz_failed"]]
    failed = [row["cheat"] for row in rows if row["kz_failed"]]
    print(
        f"\n{len(rows) - len(missed) - len(failed)} of {len(rows)} caught"
        + (f"; judged correct: {', '.join(missed)}" if missed else "")
        + (f"; not evaluated (kz failed): {', '.join(failed)}" if failed else "")
    )
    if lacking:
        print(f"not run, this machine lacks the defence that catches them (kz reports it): {', '.join(lacking)}")
    if args.out:
        write_json(args.out, {"benchmark": "cheat_table", "device": args.device, "isolation": isolation, "versions": versions(), "rows": rows, "not_run": lacking})
    sys.exit(1 if missed or failed else 0)


if __name__ == "__main__":
    main()
