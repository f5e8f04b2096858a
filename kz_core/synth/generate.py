"""Verified training pairs for supervised warm starts (``kz data synth``).

From seeds, :mod:`kz_core.synth.templates` writes problems and their kernels; this module
keeps a pair only once it has been checked:

- a Coder pair (the Coder's prompt for the problem, the kernel module as the answer) when
  the evaluator judges the kernel ``correct`` (on a CPU, Triton under its interpreter; a
  CUDA kernel, which cannot run there, when NVRTC compiles it: verdict ``compiled``);
- a Proposer pair (the Proposer's prompt for the problem's APIs, the problem as the
  answer) when module validation accepts the problem.

Rows are deduplicated (at most ``per_structure`` problems with the same normalised source,
which differ only in sizes and constants), decontaminated against a problem set
(``proposer.decontaminate``, e.g. KernelBench), split by op family (the ``heldout``
families never appear in ``train``), and written as JSON lines that Hugging Face
``datasets`` loads, each with its provenance: family, template, seed, verdict. Prompts
are exactly the ones GRPO uses (``kz_core/prompts.py``). The kernels run only in the
evaluator's sandbox; nothing here executes them.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from kz_core.config import ConfigError
from kz_core.model import Candidate, Problem, content_hash
from kz_core.synth.templates import FAMILIES, Synthetic, synthesize


@attrs.frozen
class SynthReport:
    """What a synthesis run kept and dropped."""

    out: str
    rows: int
    coder_rows: int
    proposer_rows: int
    problems: int
    duplicates: int
    contaminated: int
    rejected: dict[str, int]
    by_family: dict[str, int]
    by_split: dict[str, int]
    seconds: float
    #: split -> a problems JSONL (``name``, ``code``, ``problem_id`` from 1, ``family``) of the
    #: problems with a kept pair, beside ``out``: what ``kz generate -p`` and ``kz train
    #: coder -p`` read (``problems.ids=1-40`` takes the first 40).
    problem_files: dict[str, str] = attrs.field(factory=dict)


def _answer(code: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": f"```python\n{code.rstrip()}\n```"}]


def draw(count: int, seed: int, families: Sequence[str], per_structure: int, contaminants: list[Any], threshold: float) -> tuple[list[tuple[int, Synthetic]], int, int]:
    """``count`` distinct synthetic problems (or fewer when the families run dry).

    :returns: ``(kept (seed, synthetic) pairs, duplicates dropped, contaminated dropped)``.
    """
    from kz_core.proposer.similarity import fingerprint, most_similar

    kept: list[tuple[int, Synthetic]] = []
    seen_code: set[str] = set()
    structures: Counter[str] = Counter()
    duplicates = contaminated = 0
    attempt = 0
    while len(kept) < count and attempt < 20 * count + 100:
        family = families[attempt % len(families)]
        item_seed = seed * 1_000_003 + attempt
        attempt += 1
        synthetic = synthesize(family, item_seed)
        code_hash = content_hash(synthetic.problem)
        print_ = fingerprint(synthetic.problem)
        structure = print_.digest if print_ is not None else code_hash
        if code_hash in seen_code or structures[structure] >= per_structure:
            duplicates += 1
            continue
        if contaminants and most_similar(print_, contaminants)[1] >= threshold:
            contaminated += 1
            continue
        seen_code.add(code_hash)
        structures[structure] += 1
        kept.append((item_seed, synthetic))
    return kept, duplicates, contaminated


def synthesize_dataset(
    config: Any,
    *,
    count: int,
    out: Path,
    seed: int = 0,
    backends: Sequence[str] = ("triton", "cuda"),
    families: Sequence[str] = FAMILIES,
    heldout: Sequence[str] = ("softmax",),
    proposer: bool = True,
    per_structure: int = 3,
    progress: Callable[[str, int, int], None] | None = None,
) -> SynthReport:
    """Draw ``count`` problems, verify their kernels and modules, write the kept pairs.

    :param config: the resolved kz config (``eval``, ``policy``, ``proposer`` sections).
    :param progress: called with ``(stage, done, total)`` as verification goes.
    """
    from kz_core.evaluate import Evaluator
    from kz_core.evaluate.evaluator import resolve_device
    from kz_core.prompts import coder_prompt, proposer_prompt
    from kz_core.proposer.validate import ModuleValidator, contamination_set

    started = time.perf_counter()
    unknown = set(families) - set(FAMILIES) or set(heldout) - set(FAMILIES)
    if unknown:
        raise ConfigError(f"unknown famil{'y' if len(unknown) == 1 else 'ies'} {', '.join(sorted(unknown))}: use {', '.join(FAMILIES)}")
    contaminants = contamination_set(config.proposer.decontaminate) if config.proposer.decontaminate else []
    drawn, duplicates, contaminated = draw(count, seed, list(families), per_structure, contaminants, config.proposer.duplicate_threshold)
    problems = {}
    for item_seed, synthetic in drawn:
        name = f"synth_{synthetic.family}_{content_hash(synthetic.problem)[:10]}"
        problems[name] = (item_seed, synthetic, Problem(name, synthetic.problem))
    device = resolve_device(config.eval.device)
    rows: list[dict[str, Any]] = []
    rejected: Counter[str] = Counter()

    def provenance(name: str, item_seed: int, synthetic: Synthetic, verdict: str) -> dict[str, Any]:
        return {
            "problem": name,
            "family": synthetic.family,
            "template": synthetic.template,
            "apis": list(synthetic.apis),
            "seed": item_seed,
            "verdict": verdict,
            "split": "heldout" if synthetic.family in heldout else "train",
            "problem_code": synthetic.problem,
        }

    candidates = [
        Candidate(name, backend, getattr(synthetic, backend), sample_id=f"{name}:{backend}")
        for name, (_, synthetic, _) in problems.items()
        for backend in backends
    ]
    runnable = [c for c in candidates if device != "cpu" or c.backend == "triton"]
    compiled_only = [c for c in candidates if c not in runnable]
    with Evaluator([p for _, _, p in problems.values()], config.eval) as evaluator:
        done = 0

        def tick(_: Any) -> None:
            nonlocal done
            done += 1
            if progress is not None:
                progress("kernels", done, len(candidates))

        results = evaluator.evaluate(runnable, progress=tick) if runnable else []
        checks = evaluator.check(compiled_only, progress=tick) if compiled_only else []
    outcomes = [(r.sample_id, r.verdict.value, r.message) for r in results] + [(c.sample_id, c.status, c.message) for c in checks]
    for sample_id, verdict, message in outcomes:
        name, backend = sample_id.rsplit(":", 1)
        item_seed, synthetic, problem = problems[name]
        if verdict not in ("correct", "compiled"):
            rejected[f"{backend} {verdict}"] += 1
            continue
        prompt = coder_prompt(problem, backend, config.policy)
        rows.append({"role": "coder", "backend": backend, "prompt": prompt.chat(), "completion": _answer(getattr(synthetic, backend)), **provenance(name, item_seed, synthetic, verdict)})
    if proposer:
        with ModuleValidator(config) as validator:
            entries = [(name, synthetic.problem, synthetic.apis) for name, (_, synthetic, _) in problems.items()]
            counted = 0

            def tick_module(_: Any) -> None:
                nonlocal counted
                counted += 1
                if progress is not None:
                    progress("modules", counted, len(entries))

            validations = validator.validate(entries, batch_duplicates=False, progress=tick_module)
        for validation in validations:
            item_seed, synthetic, _ = problems[validation.name]
            if not validation.valid:
                rejected[f"module {validation.findings[0].check if validation.findings else 'invalid'}"] += 1
                continue
            prompt = proposer_prompt(list(synthetic.apis), config.policy)
            rows.append({"role": "proposer", "backend": "", "prompt": prompt.chat(), "completion": _answer(synthetic.problem), **provenance(validation.name, item_seed, synthetic, "valid")})
        # A problem module validation refuses (its output is constant, it is not
        # deterministic...) is a poor exercise for the Coder too: its pairs go as well.
        invalid = {v.name for v in validations if not v.valid}
        dropped = [row for row in rows if row["role"] == "coder" and row["problem"] in invalid]
        if dropped:
            rejected["coder pairs of invalid modules"] += len(dropped)
            rows = [row for row in rows if not (row["role"] == "coder" and row["problem"] in invalid)]
    rows.sort(key=lambda row: (row["role"], row["problem"], row["backend"]))
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    problem_files = {}
    for split in sorted({row["split"] for row in rows}):
        kept = sorted({row["problem"]: row for row in rows if row["split"] == split}.items())
        path = out.with_name(f"{out.stem}.{split}-problems.jsonl")
        path.write_text(
            "".join(json.dumps({"name": name, "code": row["problem_code"], "problem_id": i, "family": row["family"]}) + "\n" for i, (name, row) in enumerate(kept, 1)),
            encoding="utf-8",
        )
        problem_files[split] = str(path)
    return SynthReport(
        out=str(out),
        rows=len(rows),
        coder_rows=sum(1 for r in rows if r["role"] == "coder"),
        proposer_rows=sum(1 for r in rows if r["role"] == "proposer"),
        problems=len(problems),
        duplicates=duplicates,
        contaminated=contaminated,
        rejected=dict(rejected),
        by_family=dict(Counter(r["family"] for r in rows)),
        by_split=dict(Counter(r["split"] for r in rows)),
        seconds=time.perf_counter() - started,
        problem_files=problem_files,
    )
