"""Validation of proposed modules: is a module the Proposer wrote a usable training problem?

Every rule is a named check; a module is valid when no check reports an error finding:

- ``format``: no code, it does not parse, it lacks ``class Model``, ``get_inputs`` or
  ``get_init_inputs`` (``make_problem``), or forward returns something other than tensors;
- ``duplicate``: a near-duplicate of a valid module in the pool (or of an earlier module of
  the same batch): normalised-AST similarity (``similarity.py``) at or above
  ``proposer.duplicate_threshold``;
- ``contaminated``: a near-duplicate of a problem in ``proposer.decontaminate`` (e.g.
  KernelBench's ``problems.jsonl``), so that held-out evaluation stays held out;
- ``does_not_run``: it raises (or crashes its worker) while loading, building or running;
- ``too_much_memory``: its inputs and outputs exceed ``proposer.max_memory_mb``;
- ``nondeterministic``: the same seed twice, random ops in forward drawing other numbers
  the second time, gives outputs beyond the tolerance apart (dropout in training mode,
  ``torch.rand`` in forward);
- ``non_finite``: the output holds NaN or infinities;
- ``constant_output``: the output does not depend on the inputs, or a constant passes at
  the tolerance (another seed's output, zeros, the output's mean; the mean is not
  counted for single-element outputs, which always equal their mean);
- ``api_not_used``: a requested API has none of its catalog ``ops`` in the profiler's
  trace of one forward call;
- ``too_slow`` / ``too_fast``: the median forward time (a few calls, on the validating
  device) is outside ``[proposer.min_runtime_ms, proposer.max_runtime_ms]``; a module
  that runs past ``eval.run_timeout_s`` is too slow.

The static checks (format, duplicate, contaminated) run here and end a module early;
everything else runs in sandboxed *reference* workers of a pool of their own (the worker
op ``validate``, ``kz_core/evaluate/reference_ops.py``), modules concurrently. Module code
never runs in this process; this module compares the measurements it gets back.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import secrets
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from kz_core.model import Finding, Problem, Severity
from kz_core.parsing import ParsedReply
from kz_core.problems.base import make_problem
from kz_core.proposer.similarity import Fingerprint, fingerprint, most_similar
from kz_core.paths import remove_tree, scratch_root as new_scratch_root

#: Every check a validation can report, in the order they are made.
CHECKS = (
    "format",
    "duplicate",
    "contaminated",
    "does_not_run",
    "too_much_memory",
    "nondeterministic",
    "non_finite",
    "constant_output",
    "api_not_used",
    "too_slow",
    "too_fast",
)
#: Timed forward calls per module (after one warm-up call).
TIMING_TRIALS = 3


@attrs.frozen
class ModuleValidation:
    """What validation concluded about one proposed module.

    :ivar name: the module's name (a problem name once it joins the pool).
    :ivar code: its source.
    :ivar apis: the torch APIs it was asked to use.
    :ivar valid: no check reported an error.
    :ivar findings: every check's findings, errors first in check order.
    :ivar runtime_ms: median forward time on the validating device, when measured.
    :ivar io_bytes: bytes of its inputs and outputs, when it ran.
    """

    name: str
    code: str
    apis: tuple[str, ...]
    valid: bool
    findings: tuple[Finding, ...] = ()
    runtime_ms: float | None = None
    io_bytes: int | None = None

    @property
    def reason(self) -> str:
        """The first failed check (``""`` for a valid module): what reports count by."""
        return next((f.check for f in self.findings if f.severity is Severity.ERROR), "")

    @property
    def problem(self) -> Problem:
        return Problem(name=self.name, code=self.code, source="proposer")


def _result(name: str, code: str, apis: Sequence[str], findings: Iterable[Finding], **measured: Any) -> ModuleValidation:
    findings = list(findings)
    # Errors first, in check order; warnings after them.
    order = {check: i for i, check in enumerate(CHECKS)}
    findings.sort(key=lambda f: (f.severity is not Severity.ERROR, order.get(f.check, len(order))))
    valid = not any(f.severity is Severity.ERROR for f in findings)
    return ModuleValidation(name, code, tuple(apis), valid, tuple(findings), **measured)


# -- static checks ----------------------------------------------------------------------

_contamination: dict[str, list[tuple[str, Fingerprint | None]]] = {}
_contamination_lock = threading.Lock()


def contamination_set(source: str) -> list[tuple[str, Fingerprint | None]]:
    """Fingerprints of the problems in ``source`` (a problem source spec), loaded once."""
    if not source:
        return []
    with _contamination_lock:
        if source not in _contamination:
            from kz_core.problems import load_problems

            problems = load_problems(source).problems
            _contamination[source] = [(p.name, fingerprint(p.code)) for p in problems]
        return _contamination[source]


def static_findings(
    code: str | ParsedReply | None,
    threshold: float,
    known: Iterable[tuple[str, Fingerprint | None]],
    contaminants: Iterable[tuple[str, Fingerprint | None]],
) -> list[Finding]:
    """``format``, ``duplicate`` and ``contaminated`` findings for one source (nothing runs).

    :param code: the source, or a model's parsed reply (its reason says why it has none).
    """
    if isinstance(code, ParsedReply):
        if code.code is None:
            return [Finding("format", f"no code: {code.reason or 'the reply holds none'}")]
        code = code.code
    if code is None or not code.strip():
        return [Finding("format", "no code")]
    checked = make_problem("module", code)
    if not isinstance(checked, Problem):
        return [Finding("format", checked.reason)]
    own = fingerprint(code)
    findings = []
    name, value = most_similar(own, known)
    if value >= threshold:
        findings.append(Finding("duplicate", f"a near-duplicate of {name!r} (similarity {value:.2f} >= {threshold:g})"))
    name, value = most_similar(own, contaminants)
    if value >= threshold:
        findings.append(Finding("contaminated", f"a near-duplicate of the held-out problem {name!r} (similarity {value:.2f} >= {threshold:g})"))
    return findings


# -- judging a worker's measurements ----------------------------------------------------


def _single_element_constant(runs: dict[str, Any], table: str, atol: float, rtol: float) -> bool:
    """For outputs of one element each: does another seed's output, or zero, pass?"""
    import torch

    from kz_core.evaluate.audit import outputs_pass

    first, second = runs["first"]["outputs"], runs["second"]["outputs"]
    return outputs_pass(second, first, table, atol, rtol) or outputs_pass(second, [torch.zeros_like(t) for t in second], table, atol, rtol)


def judge_measurements(reply: dict[str, Any], apis: Sequence[str], catalog: dict[str, Any], proposer: Any, eval_config: Any) -> list[Finding]:
    """Findings from a successful ``validate`` reply (see the module docstring).

    :param reply: the worker's reply (``ok`` true).
    :param apis: the APIs the module was asked to use.
    :param catalog: the API catalog by name (:func:`kz_core.proposer.catalog.api_catalog`).
    :param proposer: the ``proposer`` config section (runtime and memory windows).
    :param eval_config: the ``eval`` config section (tolerances).
    """
    from kz_core.evaluate.audit import judge_audit

    findings: list[Finding] = []
    io_bytes = reply["input_bytes"] + reply["output_bytes"]
    limit = proposer.max_memory_mb * (1 << 20)
    if io_bytes > limit:
        findings.append(Finding("too_much_memory", f"inputs and outputs take {io_bytes / (1 << 20):.1f} MiB, more than proposer.max_memory_mb={proposer.max_memory_mb:g}"))
        return findings
    runs = reply["runs"]
    table, atol, rtol = eval_config.tolerance, eval_config.atol, eval_config.rtol
    single = all(t is not None and t.numel() <= 1 for t in runs["second"]["outputs"])
    for found in judge_audit(runs, table, atol, rtol):
        if found.check == "reference_error":
            findings.append(Finding("format", "forward must return a tensor, or a tuple or list of tensors"))
        elif found.check == "input_independent":
            findings.append(Finding("constant_output", "two different input seeds give identical outputs: the output does not depend on the inputs"))
        elif found.check == "constant_passes":
            if not single or _single_element_constant(runs, table, atol, rtol):
                findings.append(Finding("constant_output", found.message))
        elif found.check == "nondeterministic":
            findings.append(Finding("nondeterministic", "the same inputs give outputs beyond the tolerance apart (random ops in forward? dropout in training mode?)"))
        elif found.check == "non_finite":
            findings.append(Finding("non_finite", "the output holds NaN or infinities"))
        else:
            findings.append(attrs.evolve(found, severity=Severity.WARNING))
    seen_ops = set(reply["op_names"])
    for api in apis:
        spec = catalog.get(api)
        if spec is None or not spec.ops:
            findings.append(Finding("api_not_used", f"{api} is not in the API catalog (or lists no ops): its use was not checked", Severity.WARNING))
        elif not seen_ops & set(spec.ops):
            findings.append(Finding("api_not_used", f"{api} was requested, but none of its ops ({', '.join(spec.ops)}) ran in one forward call"))
    timed = reply["runtime"]
    runtime_ms = timed["median_ms"] if timed else reply["first_call_ms"]
    where = "in its first call" if not timed else ("on the CPU" if timed["clock"] == "cpu" else "on the GPU")
    if runtime_ms > proposer.max_runtime_ms:
        findings.append(Finding("too_slow", f"forward takes {runtime_ms:.1f} ms {where}, more than proposer.max_runtime_ms={proposer.max_runtime_ms:g}"))
    elif runtime_ms < proposer.min_runtime_ms:
        findings.append(Finding("too_fast", f"forward takes {runtime_ms:.3f} ms {where}, less than proposer.min_runtime_ms={proposer.min_runtime_ms:g}"))
    # One finding per check (constant_output can come from two audit findings).
    unique: dict[tuple[str, Severity], Finding] = {}
    for finding in findings:
        unique.setdefault((finding.check, finding.severity), finding)
    return list(unique.values())


# -- the validator ----------------------------------------------------------------------


def _file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)[:80] or "module"


class ModuleValidator:
    """Validates modules with sandboxed workers, a fresh one per module; a context manager.

    :param config: the resolved kz config (``proposer`` and ``eval`` sections are read).
    :param device: where modules run; None: ``eval.device`` (``auto``: the first GPU, else
        the CPU).
    """

    def __init__(self, config: Any, device: str | None = None):
        from kz_core.evaluate.evaluator import resolve_device
        from kz_core.evaluate.sandbox import WorkerPool, settings_from_config
        from kz_core.proposer.catalog import api_catalog

        self.config = config
        self.device = resolve_device(device or config.eval.device)
        self.catalog = api_catalog()
        self.contaminants = contamination_set(config.proposer.decontaminate)
        eval_config = config.eval
        self.settings = settings_from_config(eval_config, self.device, new_scratch_root("validate", eval_config.scratch_dir))
        self.workers = eval_config.workers or (min(8, os.cpu_count() or 1) if self.device == "cpu" else 2)
        # A proposed module is model-written code: each one runs in a fresh sandboxed
        # worker forked by a zygote, as candidates do (docs/security.md).
        from kz_core.evaluate.sandbox import start_zygote

        self.zygote = start_zygote(self.device, self.settings, eval_config.isolation_off)
        self.pool = WorkerPool(self.device, "candidate", self.workers, self.settings, zygote=self.zygote)
        self.init_seed, self.seeds = secrets.randbits(31), [secrets.randbits(62), secrets.randbits(62)]

    def __enter__(self) -> ModuleValidator:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Stop the workers and remove their scratch folders; idempotent."""
        try:
            self.pool.close()
        finally:
            self.zygote.close()
            remove_tree(self.settings.scratch_root)  # the modules' workers wrote there: never raises

    def validate(
        self,
        modules: Sequence[tuple[str, str | ParsedReply | None, Sequence[str]]],
        pool: Any = None,
        *,
        batch_duplicates: bool = True,
        progress: Callable[[ModuleValidation], None] | None = None,
    ) -> list[ModuleValidation]:
        """Validate ``(name, code, apis)`` triples; one result per module, in order.

        ``code`` is the source, or a model's reply parsed by ``kz_core.parsing.extract_code``
        (a reply without code is a ``format`` finding with the parser's reason).

        :param pool: a :class:`kz_core.proposer.pool.ModulePool` whose valid modules count
            for ``duplicate`` (None: no pool).
        :param batch_duplicates: also count earlier modules of this batch for ``duplicate``
            (``kz propose``); the Proposer's trainer penalises repetition in a batch itself.
        :param progress: called with each result as it finishes.
        """
        threshold = self.config.proposer.duplicate_threshold
        known: list[tuple[str, Fingerprint | None]] = list(pool.fingerprints()) if pool is not None else []
        results: list[ModuleValidation | None] = [None] * len(modules)
        to_run = []
        sources = [code.code if isinstance(code, ParsedReply) else code for _, code, _ in modules]
        for index, (name, code, apis) in enumerate(modules):
            findings = static_findings(code, threshold, known, self.contaminants)
            if findings:
                results[index] = _result(name, sources[index] or "", apis, findings)
                if progress is not None:
                    progress(results[index])  # type: ignore[arg-type]
                continue
            if batch_duplicates:
                known.append((name, fingerprint(sources[index])))  # type: ignore[arg-type]
            to_run.append(index)
        with concurrent.futures.ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="kz-validate") as executor:
            futures = {executor.submit(self._run, modules[i][0], sources[i], modules[i][2]): i for i in to_run}
            for future in concurrent.futures.as_completed(futures):
                results[futures[future]] = future.result()
                if progress is not None:
                    progress(results[futures[future]])  # type: ignore[arg-type]
        return results  # type: ignore[return-value]

    def _run(self, name: str, code: str, apis: Sequence[str]) -> ModuleValidation:
        from kz_core.evaluate.calls import trim_traceback
        from kz_core.evaluate.sandbox import WorkerDied, WorkerTimeout
        from kz_core.model import content_hash

        proposer, eval_config = self.config.proposer, self.config.eval
        request = {
            "op": "validate",
            "problem": {"name": _file_name(name), "code": code, "hash": content_hash(code)},
            "init_seed": self.init_seed,
            "seeds": self.seeds,
            "max_bytes": int(proposer.max_memory_mb * (1 << 20)),
            "timing_trials": TIMING_TRIALS,
            "skip_timing_ms": 10 * proposer.max_runtime_ms,
        }
        with self.pool.acquire() as worker:
            try:
                reply = worker.call(request, timeout=eval_config.run_timeout_s)
            except WorkerTimeout as exc:
                return _result(name, code, apis, [Finding("too_slow", f"validation ran past eval.run_timeout_s: {exc}")])
            except WorkerDied as exc:
                tail = worker.log_tail(1500).strip()
                return _result(name, code, apis, [Finding("does_not_run", f"the module crashed its worker: {exc}" + (f"\n{tail}" if tail else ""))])
            if not reply.get("ok"):
                worker.kill()  # whatever the module left behind goes with the worker
        if not reply.get("ok"):
            where = "while loading" if reply.get("stage") == "problem" else "while building or running the model"
            trace = trim_traceback(reply.get("traceback", ""), 6)
            return _result(name, code, apis, [Finding("does_not_run", f"{reply.get('message', 'failed')} ({where})" + (f"\n{trace}" if trace else ""))])
        findings = judge_measurements(reply, apis, self.catalog, proposer, eval_config)
        runtime_ms = reply["runtime"]["median_ms"] if reply.get("runtime") else reply.get("first_call_ms")
        return _result(name, code, apis, findings, runtime_ms=runtime_ms, io_bytes=reply["input_bytes"] + reply["output_bytes"])


def validate_modules(
    modules: Sequence[tuple[str, str | ParsedReply | None, Sequence[str]]],
    config: Any,
    pool: Any = None,
    *,
    device: str | None = None,
    batch_duplicates: bool = True,
) -> list[ModuleValidation]:
    """Validate ``(name, code, apis)`` triples with a validator started for this call.

    :param config: the resolved kz config.
    :param pool: the module pool that ``duplicate`` compares against (None: none).
    :param device: where modules run (None: ``eval.device``).
    :param batch_duplicates: see :meth:`ModuleValidator.validate`.
    :returns: one :class:`ModuleValidation` per module, in order.
    """
    with ModuleValidator(config, device) as validator:
        return validator.validate(modules, pool, batch_duplicates=batch_duplicates)
