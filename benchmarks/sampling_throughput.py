"""Sampling throughput of the Coder policy: tokens per second and prompts per minute.

Samples ``--n`` completions for each of ``--prompts`` problems (64 samples by default: 8
problems x 8) through the ``sample_completions`` hook, with the configured policy (the
embedded SmolLM2 unless ``policy.model=...``). The model is loaded and warmed up with one
short generation before the clock starts, so the numbers are steady-state sampling. Each
``--batch-sizes`` value (prompts per ``generate`` call) is measured separately. Usage:

    python benchmarks/sampling_throughput.py --problems examples --prompts 8 --n 8 --out sampling.json
    python benchmarks/sampling_throughput.py --problems problems.jsonl --level 1 policy.max_new_tokens=512
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import versions, write_json  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", default="examples", help="a problem source (kz problems list accepts the same)")
    parser.add_argument("--level", type=int, default=0, help="KernelBench level within --problems; 0: all")
    parser.add_argument("--prompts", type=int, default=8, help="problems to prompt with (repeated when the source has fewer)")
    parser.add_argument("--n", type=int, default=8, help="samples per prompt")
    parser.add_argument("--batch-sizes", default="8", help="comma-separated prompts per generate call")
    parser.add_argument("--backend", default="triton")
    parser.add_argument("--out", default=None)
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides, e.g. policy.max_new_tokens=512")
    args = parser.parse_args()

    import attrs
    from omegaconf import OmegaConf

    from kz_core.config import load_config
    from kz_core.plugins import get_plugin_manager
    from kz_core.problems import load_problems
    from kz_core.prompts import coder_prompt

    config = load_config(None, list(args.overrides))
    problems = list(load_problems(args.problems, level=args.level or None).problems)
    if not problems:
        raise SystemExit(f"no problems in {args.problems!r} (level {args.level or 'any'})")
    chosen = [problems[i % len(problems)] for i in range(args.prompts)]
    # Repeated problems get distinct prompt ids so that every prompt counts.
    prompts = [attrs.evolve(coder_prompt(p, args.backend, config.policy), prompt_id=f"{p.name}#{i}") for i, p in enumerate(chosen)]
    pm = get_plugin_manager()

    warm = OmegaConf.merge(config.policy, {"max_new_tokens": 8})
    started = time.perf_counter()
    pm.hook.sample_completions(prompts=prompts[:1], n=1, role="coder", config=warm)
    load_s = time.perf_counter() - started

    runs = []
    for batch_size in [int(b) for b in args.batch_sizes.split(",") if b.strip()]:
        policy = OmegaConf.merge(config.policy, {"batch_size": batch_size})
        started = time.perf_counter()
        groups = pm.hook.sample_completions(prompts=prompts, n=args.n, role="coder", config=policy)
        seconds = time.perf_counter() - started
        tokens = [c.tokens for group in groups for c in group]
        runs.append(
            {
                "batch_size": batch_size,
                "samples": len(tokens),
                "seconds": round(seconds, 3),
                "generated_tokens": sum(tokens),
                "tokens_per_s": round(sum(tokens) / seconds, 1),
                "samples_per_min": round(60 * len(tokens) / seconds, 1),
                "prompts_per_min": round(60 * len(prompts) / seconds, 2),
                "mean_tokens_per_sample": round(statistics.fmean(tokens), 1),
                "hit_max_new_tokens": sum(t >= policy.max_new_tokens for t in tokens),
            }
        )
        print(f"batch {batch_size}: {len(tokens)} samples, {sum(tokens)} tokens in {seconds:.1f} s", file=sys.stderr)

    write_json(
        args.out,
        {
            "command": " ".join(sys.argv),
            "versions": versions(),
            "model": config.policy.model or "embedded:smollm2",
            "policy": {k: config.policy[k] for k in ("device", "dtype", "temperature", "top_p", "max_new_tokens", "one_shot")},
            "prompts": len(prompts),
            "n": args.n,
            "load_and_warmup_s": round(load_s, 2),
            "runs": runs,
        },
    )


if __name__ == "__main__":
    main()
