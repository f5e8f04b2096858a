"""KernelBench references timed by kz's own timing code (``timing.time_forward``) on a GPU
left with little free memory: the ratio of their time on unseen inputs to their median on
the repeated timing inputs, which ``judge.MEMOISED`` (3) rejects. On the H200 the honest
reference of level 1's problem 72 (a grouped 3D transposed convolution) once measured
5.2 with events timing while another worker ran out of GPU memory (docs/benchmarks.md,
twenty-seventh session); this says whether a GPU near full does that.

    python benchmarks/unseen_pressure.py --problems problems.jsonl --ids 72,69,12 \\
        --methods events,graph --keep-gb none,2,0.6 --repeats 3 --out unseen_pressure.json

Each line: problem, method, the free memory left (``none``: nothing filled), repeat,
median ms, unseen ms, their ratio, and the allocator's retries (``num_alloc_retries``: a
cudaMalloc that failed and was tried again after the cache was given back) during the
timing. Needs a CUDA GPU; the GPU should be otherwise idle.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _model(rows: list[dict], level: int, pid: int):
    """The reference module of one problem on the GPU, and a seeded input maker."""
    import torch

    code = next(r["code"] for r in rows if int(r["level"]) == level and int(r["problem_id"]) == pid)
    namespace: dict = {}
    exec(compile(code, f"kernelbench_{level}_{pid}", "exec"), namespace)  # noqa: S102 - KernelBench's own reference
    model = namespace["Model"](*namespace["get_init_inputs"]()).cuda()
    examples = namespace["get_inputs"]()

    def make_inputs(seed: int) -> list:
        generator = torch.Generator(device="cuda").manual_seed(seed)
        made = []
        for example in examples:
            if isinstance(example, torch.Tensor) and example.is_floating_point():
                made.append(torch.rand(example.shape, dtype=example.dtype, device="cuda", generator=generator))
            elif isinstance(example, torch.Tensor):
                made.append(example.cuda())
            else:
                made.append(example)
        return made

    return model, make_inputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", required=True, help="KernelBench's problems.jsonl")
    parser.add_argument("--level", type=int, default=1)
    parser.add_argument("--ids", default="72,69,12")
    parser.add_argument("--methods", default="events,graph")
    parser.add_argument("--keep-gb", default="none,2,0.6", help="free GPU memory to leave, GB (none: fill nothing)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import torch

    from kz_core.evaluate.timing import TimingSettings, time_forward

    if not torch.cuda.is_available():
        raise SystemExit("unseen_pressure.py needs a CUDA GPU")
    rows = [json.loads(line) for line in Path(args.problems).read_text().splitlines() if line.strip()]
    results = []
    for pid in (int(x) for x in args.ids.split(",")):
        model, make_inputs = _model(rows, args.level, pid)
        for method in args.methods.split(","):
            settings = TimingSettings(method=method)
            for keep in args.keep_gb.split(","):
                filler = None
                torch.cuda.empty_cache()
                if keep != "none":
                    free, _ = torch.cuda.mem_get_info()
                    filler = torch.empty(max(0, int(free - float(keep) * 2**30)), dtype=torch.uint8, device="cuda")
                for repeat in range(args.repeats):
                    retries = torch.cuda.memory_stats().get("num_alloc_retries", 0)
                    row = {"problem": pid, "method": method, "keep_gb": keep, "repeat": repeat}
                    try:
                        timed = time_forward(model, make_inputs, [1, 2], [3, 4], "cuda", settings, unseen=[100 + 2 * repeat, 101 + 2 * repeat])
                    except Exception as exc:  # noqa: BLE001 - a row says why it has no time
                        row["error"] = f"{type(exc).__name__}: {str(exc)[:160]}"
                    else:
                        stats = timed.stats
                        row.update(median_ms=stats["median_ms"], unseen_ms=stats.get("unseen_ms"), note=stats.get("note", ""))
                        row["ratio"] = row["unseen_ms"] / row["median_ms"] if row["unseen_ms"] and row["median_ms"] else None
                    row["alloc_retries"] = torch.cuda.memory_stats().get("num_alloc_retries", 0) - retries
                    results.append(row)
                    said = row.get("error") or f"median {row['median_ms']:.3f} ms unseen {row['unseen_ms'] or 0:.3f} ms ratio {row['ratio'] or 0:.2f}"
                    print(f"{pid:>4} {method:<6} keep {keep:>4} #{repeat} {said} retries {row['alloc_retries']}", flush=True)
                del filler
                torch.cuda.empty_cache()
        del model
    if args.out:
        Path(args.out).write_text(json.dumps({"benchmark": "unseen_pressure", "torch": torch.__version__, "device": torch.cuda.get_device_name(), "rows": results}, indent=1))


if __name__ == "__main__":
    main()
