"""The kz data model: frozen attrs classes that cross process and cluster boundaries.

Every class here is immutable, compares by value, pickles, and round-trips through JSON
with :func:`to_json_dict` / :func:`from_json_dict` (see ``kz_core/serialization.py``).
Sequences are tuples and mappings are plain dicts of JSON-friendly values, so that a result
written by a worker on one machine reads back identically on another.

This module holds data only: no I/O, no torch, no behaviour beyond small derived values.
"""

from __future__ import annotations

import enum
import hashlib

import attrs


def content_hash(text: str) -> str:
    """The sha256 hex digest of ``text`` encoded as UTF-8: the identity of a source."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Verdict(str, enum.Enum):
    """What the evaluator concluded about one candidate.

    Exactly one verdict per candidate; failures are verdicts, never exceptions.
    """

    #: Outputs matched the reference on every trial and no guard objected.
    CORRECT = "correct"
    #: Ran, but an output differed from the reference (value, shape, dtype or type).
    INCORRECT = "incorrect"
    #: A guard caught a hack (fallback to torch, dead kernel, cached output, ...).
    REJECTED = "rejected"
    #: The source did not compile (Python syntax, Triton or CUDA compiler error).
    COMPILE_ERROR = "compile_error"
    #: Raised or crashed while running (including segfaults and early exits).
    RUNTIME_ERROR = "runtime_error"
    #: Exceeded the wall-clock limit; the worker's process group was killed.
    TIMEOUT = "timeout"
    #: The model's reply held no usable candidate (no code block, no ``ModelNew``).
    FORMAT_ERROR = "format_error"

    @property
    def is_failure(self) -> bool:
        return self is not Verdict.CORRECT


class Severity(str, enum.Enum):
    """How much a finding weighs on the verdict."""

    #: Recorded for people to read; does not change the verdict.
    INFO = "info"
    #: Suspicious; recorded, does not change the verdict (``warn`` guard mode).
    WARNING = "warning"
    #: Decides the verdict (the finding's check names the reason).
    ERROR = "error"


#: The longest message a finding keeps (characters): its head and its tail, with what
#: was cut said between them. A worker's reply is untrusted, and a message copied from
#: one (a forged 100 MiB "compile error") made results and the journal 210 MB each
#: (red-team round 26b).
MAX_FINDING_CHARS = 16_000


def _bounded(message: str) -> str:
    if not isinstance(message, str) or len(message) <= MAX_FINDING_CHARS:
        return message
    head, tail = MAX_FINDING_CHARS * 3 // 4 - 64, MAX_FINDING_CHARS // 4 - 64  # room for the note: cut once, kept as is after
    return f"{message[:head]}\n[... {len(message) - head - tail} characters cut ...]\n{message[-tail:]}"


@attrs.frozen
class Finding:
    """One observation by a named check about a candidate or a problem.

    :ivar check: the check's stable name, e.g. ``"dead_kernel"`` or ``"try_except_fallback"``.
    :ivar message: what was found, in words a person can act on.
    :ivar severity: see :class:`Severity`.
    :ivar line: 1-based source line the finding points at, when there is one.
    """

    check: str = attrs.field(converter=lambda check: check[:200] if isinstance(check, str) else check)
    message: str = attrs.field(converter=_bounded)
    severity: Severity = Severity.ERROR
    line: int | None = None


@attrs.frozen
class Problem:
    """A KernelBench-format problem: a PyTorch reference module and its inputs.

    The source defines ``class Model(nn.Module)``, ``get_inputs()`` and
    ``get_init_inputs()`` at module level.

    :ivar name: the file name without ``.py``, or the JSONL ``name``.
    :ivar code: the module's full source.
    :ivar level: KernelBench level (1-4) when known.
    :ivar problem_id: the numeric id within its level when known.
    :ivar source: where it was loaded from (a path, a dataset id), for messages.
    """

    name: str
    code: str
    level: int | None = None
    problem_id: int | None = None
    source: str = ""

    @property
    def content_hash(self) -> str:
        return content_hash(self.code)


@attrs.frozen
class ProblemError:
    """A problem that could not be loaded, reported instead of raised.

    :ivar name: the problem's name when known, else a location such as ``file.jsonl:12``.
    :ivar reason: why it was rejected (syntax error with its line, missing ``Model``, ...).
    :ivar source: where it was found.
    """

    name: str
    reason: str
    source: str = ""


@attrs.frozen
class Candidate:
    """A proposed replacement for a problem's module, written by a person or a model.

    The source defines ``class ModelNew(nn.Module)`` with ``Model``'s constructor signature
    and launches kernels of ``backend``.

    :ivar problem: the name of the problem it answers.
    :ivar backend: a registered backend name (``triton``, ``cuda``, ``cuda_inline``, ...).
    :ivar code: the module source.
    :ivar sample_id: distinguishes samples for one problem (0, 1, ... or any label).
    """

    problem: str
    backend: str
    code: str
    sample_id: str = "0"

    @property
    def content_hash(self) -> str:
        return content_hash(self.code)


@attrs.frozen
class Tolerance:
    """Closeness required of one output: ``|actual - expected| <= atol + rtol * |expected|``.

    :ivar atol: absolute tolerance.
    :ivar rtol: relative tolerance.
    """

    atol: float
    rtol: float


@attrs.frozen
class StageTimings:
    """Wall-clock seconds spent in each evaluation stage (None: stage not reached).

    ``reference_s`` includes waiting for a reference worker; ``total_s`` also covers what
    no stage names (fuzzing, unloading the candidate).
    """

    static_s: float | None = None
    #: Getting the problem's reference outputs (computed, or waited for; ~0 when cached).
    reference_s: float | None = None
    #: Waiting for a candidate worker, and for a large problem's GPU memory reservation.
    waiting_s: float | None = None
    compile_s: float | None = None
    correctness_s: float | None = None
    timing_s: float | None = None
    #: Timing the eager and compile baselines (~0 when cached).
    baseline_s: float | None = None
    total_s: float | None = None


@attrs.frozen
class RuntimeStats:
    """Repeated timings of one callable.

    :ivar median_ms: median over trials, milliseconds.
    :ivar iqr_ms: interquartile range (p75 - p25), milliseconds.
    :ivar min_ms: fastest trial, milliseconds.
    :ivar trials: number of timed trials.
    :ivar clock: ``"cuda_graph"`` (CUDA graph replays timed with events) or
        ``"cuda_events"`` (events around each call) on a GPU, ``"cpu"`` for host
        wall-clock timings, which are never turned into speedups. Speedups only ever
        compare timings of the same clock.
    :ivar calls_per_trial: forward calls one timed trial replayed (a trial's time is
        divided by it; 1 outside graph timing).
    :ivar note: why a GPU timing is not of the requested method (``""`` when it is).
    :ivar unseen_ms: a candidate's time per call on inputs it had never seen, after the
        timed trials on repeated inputs (GPU only; ``None`` for baselines and CPUs).
    """

    median_ms: float
    iqr_ms: float
    min_ms: float
    trials: int
    clock: str
    calls_per_trial: int = 1
    note: str = ""
    unseen_ms: float | None = None


@attrs.frozen
class Environment:
    """Identity of the device and software a result was measured on."""

    device: str = "cpu"
    device_name: str = ""
    python: str = ""
    torch: str = ""
    backend_version: str = ""
    driver: str = ""
    #: How candidate processes were isolated (``isolation.Support.summary``).
    isolation: str = ""


@attrs.frozen
class EvalResult:
    """Everything the evaluator concluded about one candidate.

    :ivar problem: the problem's name.
    :ivar sample_id: the candidate's sample id.
    :ivar backend: the candidate's backend.
    :ivar verdict: see :class:`Verdict`.
    :ivar findings: every check's findings, in the order they were made.
    :ivar timings: seconds per stage.
    :ivar max_abs_error: largest absolute difference from the reference over all trials.
    :ivar max_rel_error: largest relative difference from the reference over all trials.
    :ivar runtime: the candidate's timing, when measured.
    :ivar baselines: timing of reference implementations by name (``eager``, ``compile``).
    :ivar speedups: baseline median / candidate median by baseline name; only for GPU
        timings, never for CPU ones.
    :ivar launches: kernel launches of the declared backend seen during one forward call.
    :ivar environment: device and software identity.
    :ivar problem_hash: content hash of the problem source.
    :ivar candidate_hash: content hash of the candidate source.
    :ivar message: one line summarising why the verdict is what it is.
    """

    problem: str
    sample_id: str
    backend: str
    verdict: Verdict
    findings: tuple[Finding, ...] = ()
    timings: StageTimings = StageTimings()
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    runtime: RuntimeStats | None = None
    baselines: dict[str, RuntimeStats] = attrs.field(factory=dict)
    speedups: dict[str, float] = attrs.field(factory=dict)
    launches: int | None = None
    environment: Environment = Environment()
    problem_hash: str = ""
    candidate_hash: str = ""
    message: str = ""

    @property
    def correct(self) -> bool:
        return self.verdict is Verdict.CORRECT


@attrs.frozen
class CheckResult:
    """What ``kz check`` found: static checks and compilation only, nothing run.

    :ivar problem: the problem's name.
    :ivar sample_id: the candidate's sample id.
    :ivar backend: the candidate's backend.
    :ivar status: ``compiled`` when it passed the static checks and compiled, else the
        verdict that stopped it (``format_error``, ``rejected``, ``compile_error``, ...).
    :ivar findings: the findings of the static checks and of compilation.
    :ivar compile_s: seconds spent loading and compiling, when it got that far.
    :ivar message: one line for people.
    """

    problem: str
    sample_id: str
    backend: str
    status: str
    findings: tuple[Finding, ...] = ()
    compile_s: float | None = None
    message: str = ""


@attrs.frozen
class ApiSpec:
    """A torch API a Proposer may build a problem from, as registered through ``register_apis``.

    :ivar name: the API as written in code (``torch.matmul``, ``torch.nn.functional.gelu``).
    :ivar category: ``elementwise``, ``activation``, ``reduction``, ``matmul``,
        ``convolution``, ``pooling``, ``normalization``, ``softmax``, ``loss``,
        ``indexing``, ``scan``, ``attention``, ...
    :ivar description: one line on what it computes.
    :ivar shapes: what inputs it needs (``(B, M, K) and (B, K, N) tensors``).
    :ivar ops: aten operators whose presence in a profiler trace shows the API ran (any one
        of them suffices).
    """

    name: str
    category: str
    description: str = ""
    shapes: str = ""
    ops: tuple[str, ...] = ()


@attrs.frozen
class BackendInfo:
    """A backend a plugin provides, as registered through ``register_backends``.

    :ivar name: the name candidates use in their ``backend`` field (``triton``, ``cuda``).
    :ivar language: what kernels are written in (``triton``, ``cuda``, ...).
    :ivar description: one line for ``kz plugins`` and ``kz backends``.
    :ivar runs_on_cpu: whether its kernels execute without a GPU (Triton's interpreter
        does; CUDA kernels compile on a CPU but cannot run there).
    :ivar trusted_kernels: its plugin implements ``backend_kernels``: candidates' forward
        calls are recorded as plans and replayed, checked and timed by a trusted executor
        (otherwise they run in the candidate's own sandboxed process, and results say so).
    :ivar unverified_fallback: with ``trusted_kernels``: a candidate whose forward cannot be
        recorded as a plan (``not_replayable``: its launches come from host code that does
        what a plan cannot describe) may be evaluated as a backend without trusted kernels,
        with the ``unverified_execution`` warning, instead of being rejected: where the
        user sets ``eval.unverified_fallback`` (off by default: the candidate chooses that
        route, and there it decides its own evidence).
    :ivar prompt_guide: how to write a kernel for it, the first paragraph of the Coder's
        prompt (when empty: "Write the kernels for the NAME backend: DESCRIPTION.").
    :ivar versions: distributions whose versions every result reports with torch's
        (``("triton",)``).
    :ivar cpu_environment: variables every evaluation process gets on a CPU
        (``{"TRITON_INTERPRET": "1"}``); a mapping, kept as sorted pairs.
    :ivar preload: modules the sandbox's zygote imports once, before it forks any worker,
        so that each candidate does not import them again; none may initialise CUDA.
    :ivar environment: ``(role, variable, template)`` triples: what a worker of ``role``
        gets in its environment (``candidate``, ``executor``, ``sealed_executor`` once an
        executor runs the problem's code, ``reference``, ``trusted`` for unsandboxed
        workers, where it does not replace a value already set); ``{scratch}`` is the
        worker's scratch folder, ``{cache}`` the kz cache (Triton's cache per role).
    :ivar packages: import packages whose folders sandboxed workers must read beside the
        core's and torch's (``("triton", "kz_backend_triton")``).
    :ivar passthrough: variables of the user's environment its workers may inherit
        (a compiler's path, for example); everything not allowed is dropped.
    :ivar shared_caches: folders of the kz cache that executors write (kz's code only, before
        the problem's) and candidate workers read (``triton-executor``).
    :ivar builder: ``"module:function"`` that builds what a candidate builds at import
        (``function(arguments, folder, device) -> dict``, run by kz's trusted builder), for
        backends that defer their builds (``kz_core.evaluate.builds``); empty: none. A
        result with ``"status": "unavailable"`` means this machine cannot build it; one
        with ``"retry": True`` did not finish (a timeout): nothing of it is shared, and the
        candidate gets ``compile_error`` with its ``message``.
    :ivar build_identity: ``"module:function"`` giving what, beside the arguments, shapes
        a build (``function(device) -> JSON data``: the toolchain); with ``builder``.
    """

    name: str
    language: str
    description: str = ""
    runs_on_cpu: bool = False
    trusted_kernels: bool = False
    unverified_fallback: bool = False
    prompt_guide: str = ""
    versions: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    cpu_environment: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=lambda m: tuple(sorted(dict(m).items())))
    preload: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    environment: tuple[tuple[str, str, str], ...] = attrs.field(default=(), converter=lambda items: tuple(tuple(item) for item in items))
    shared_caches: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    packages: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    passthrough: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    builder: str = ""
    build_identity: str = ""


@attrs.frozen
class ChatMessage:
    """One message of a chat prompt.

    :ivar role: ``system``, ``user`` or ``assistant``.
    :ivar content: the message text.
    """

    role: str
    content: str


@attrs.frozen
class Prompt:
    """A chat prompt for a policy: what the Coder or the Proposer is asked.

    :ivar prompt_id: what it asks about (a problem's name, an API set's id).
    :ivar messages: the conversation so far; the policy applies its chat template.
    """

    prompt_id: str
    messages: tuple[ChatMessage, ...]

    def chat(self) -> list[dict[str, str]]:
        """The messages as chat dicts (``role``, ``content``): what chat templates, TRL
        datasets and the training data files take."""
        return [{"role": m.role, "content": m.content} for m in self.messages]


@attrs.frozen
class Completion:
    """One completion sampled from a policy for one prompt.

    :ivar prompt_id: which prompt it answers (a problem name, an API-set id).
    :ivar role: ``coder`` or ``proposer``.
    :ivar text: the model's reply, verbatim.
    :ivar sample_index: 0..n-1 among the samples for the prompt.
    :ivar tokens: number of generated tokens, the end-of-sequence token included.
    """

    prompt_id: str
    role: str
    text: str
    sample_index: int = 0
    tokens: int = 0


@attrs.frozen
class ModuleStats:
    """The Coder's record on one training module (a problem), for frontier selection.

    :ivar module: the module's (problem's) name.
    :ivar apis: the torch APIs it was built from, when proposed from an API set.
    :ivar samples: Coder samples evaluated on it.
    :ivar correct: how many of those were correct.
    :ivar best_speedup: best speedup of a correct sample, when measured.
    """

    module: str
    apis: tuple[str, ...] = ()
    samples: int = 0
    correct: int = 0
    best_speedup: float | None = None

    @property
    def pass_rate(self) -> float | None:
        return self.correct / self.samples if self.samples else None


@attrs.frozen
class FrontierSelection:
    """What the frontier chose for the next round.

    :ivar modules: module names for Coder training, most valuable first.
    :ivar api_sets: API sets to prompt the Proposer with.
    :ivar scores: the frontier score of each chosen module.
    """

    modules: tuple[str, ...] = ()
    api_sets: tuple[tuple[str, ...], ...] = ()
    scores: dict[str, float] = attrs.field(factory=dict)


@attrs.frozen
class TrainingSummary:
    """What one training run of a policy (``train_policy`` hook) did.

    :ivar role: ``coder`` or ``proposer``.
    :ivar steps: optimizer steps the run reached (its global step, resumed steps included).
    :ivar seconds: wall-clock seconds this call spent training.
    :ivar model_path: the trained model's folder (or model id), ready for sampling and
        for further training.
    :ivar reward_wait_s: seconds of that time spent waiting for rewards (the evaluator).
    """

    role: str
    steps: int
    seconds: float
    model_path: str
    reward_wait_s: float = 0.0
