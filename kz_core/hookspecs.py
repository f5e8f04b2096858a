"""Every kz hook specification, and the two markers. Nothing else lives here.

Plugins implement hooks with ``from kz_core import hookimpl``. Implementations take only the
arguments they use. Hooks marked "Stops at the first non-None result" answer "who handles
this?" (which backend compiles this candidate); every other hook collects one result per
plugin. ``docs/plugin_hooks.md`` documents each hook with an example.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy

from kz_core.errors import KzError

if TYPE_CHECKING:  # the specs' types, without importing click or torch at start-up
    import click

    from kz_core.backend import CompiledCandidate, CompileFailure, RunOutput, TrustedKernels
    from kz_core.config import KzConfig, PolicyConfig, RewardConfig
    from kz_core.model import (
        ApiSpec,
        BackendInfo,
        Candidate,
        Completion,
        EvalResult,
        Finding,
        FrontierSelection,
        ModuleStats,
        Problem,
        Prompt,
        Tolerance,
        TrainingSummary,
    )
    from kz_core.problems.base import ProblemSource

hookspec = pluggy.HookspecMarker("kz")
hookimpl = pluggy.HookimplMarker("kz")


class HookUserError(KzError, RuntimeError):
    """Raised by a hook implementation for a failure the user can fix (a model that cannot be
    found, an impossible option); the message says what to change. kz's commands print it
    as one line and exit with status 2, as for their own usage errors."""


# ---------------------------------------------------------------------------------------
# Registration: what a plugin provides. Called once, when plugins are loaded.
# ---------------------------------------------------------------------------------------


@hookspec
def register_backends(register: Callable[[BackendInfo], None]) -> None:
    """Register the kernel backends this plugin provides.

    Call ``register(BackendInfo(name=..., language=..., description=..., runs_on_cpu=...))``
    once per backend. A candidate names its backend in ``Candidate.backend``; the plugin
    that registers a name also answers :func:`backend_compile`, :func:`backend_run` and
    :func:`backend_kernels` for candidates with that name, and kz calls those hooks on
    that plugin only (``kz_core.plugins.backend_hook``): no other plugin sees them.
    Registering a name another plugin registered is an error that names both plugins.

    :param register: callback taking one :class:`kz_core.model.BackendInfo`.
    :returns: nothing; results are ignored.
    """


@hookspec
def register_config(register: Callable[[Any], None]) -> None:
    """Contribute configuration keys: a section of the plugin's own, or keys added to a
    core section (a reward plugin adds its parameters to ``reward``).

    Call ``register(ConfigSection(section="reward", fields=MyKeys, validate=check))`` where
    ``MyKeys`` is a dataclass whose fields are the keys, with types, defaults and help (the
    comment above each field, or ``field(metadata={"help": ...})``). The keys load, merge
    and override like the core's (``reward.tau=0.3``), ``kz config show`` prints them with
    their help, and ``check(section)`` runs whenever a config loads, raising
    :class:`kz_core.config.ConfigError` for a value out of range. A key that the core or
    another plugin defines too is an error naming both.

    :param register: callback taking one :class:`kz_core.config.ConfigSection`.
    :returns: nothing; results are ignored.
    """


@hookspec
def register_problem_sources(register: Callable[[ProblemSource], None]) -> None:
    """Register loaders for problem sets (directories, JSONL files, datasets, ...).

    Call ``register(source)`` with a :class:`kz_core.problems.base.ProblemSource` whose
    ``accepts(spec)`` says whether it understands a ``problems.source`` string and whose
    ``load(spec)`` yields :class:`~kz_core.model.Problem` and, for entries that cannot be
    loaded, :class:`~kz_core.model.ProblemError`. Duplicate source names are an error.

    :param register: callback taking one ``ProblemSource``.
    :returns: nothing; results are ignored.
    """


@hookspec
def register_apis(register: Callable[[ApiSpec], None]) -> None:
    """Add torch APIs to the catalog the Proposer builds problems from.

    Call ``register(ApiSpec(name=..., category=..., ops=(...)))`` once per API. ``ops`` lists
    aten operators that show the API ran; module validation looks for them in a profiler
    trace. Registering a name another plugin registered is an error naming both.

    :param register: callback taking one :class:`kz_core.model.ApiSpec`.
    :returns: nothing; results are ignored.
    """


@hookspec
def register_commands(cli: click.Group) -> None:
    """Add subcommands to the ``kz`` command line.

    Decorate functions with ``@cli.command()`` (or add groups with ``@cli.group()``), as
    with any click group. A command that accepts ``key=value`` overrides should take them
    as ``click.argument("overrides", nargs=-1)`` and resolve them with
    :func:`kz_core.config.load_config`.

    :param cli: the top-level ``kz`` :class:`click.Group`.
    :returns: nothing; results are ignored.
    """


# ---------------------------------------------------------------------------------------
# Evaluation: static checks run in the trusted parent process on source text; compile and
# run happen inside sandboxed worker processes; output checks run in the parent again.
# ---------------------------------------------------------------------------------------


@hookspec
def static_checks(candidate: Candidate, problem: Problem) -> list[Finding]:
    """Inspect a candidate's source before anything runs.

    Runs in the trusted parent on text only: parse it (``ast``), never import or execute
    it. Report what a reviewer would object to: no kernel of the declared backend, a
    try/except fallback to torch, calls to the reference ``Model``, and so on. Findings of
    severity ``error`` decide the verdict (``rejected``, or ``format_error`` for a source
    that does not parse or has no ``ModelNew``).

    :param candidate: the candidate, with its ``backend`` and ``code``.
    :param problem: the problem it answers.
    :returns: a list of :class:`~kz_core.model.Finding` (empty when nothing is wrong).
    """


@hookspec(firstresult=True)
def backend_compile(candidate: Candidate, device: str, workdir: Path) -> CompiledCandidate | CompileFailure | None:
    """Turn a candidate's source into something runnable on ``device``.

    Runs inside a sandboxed worker, never in the caller. Answer only for candidates whose
    ``backend`` you registered; return None for the others. Load the source as a fresh
    module with your backend's launch accounting in place, compile what must be compiled
    before the first call, and return the module's ``ModelNew`` class. Report compiler
    errors as a :class:`~kz_core.backend.CompileFailure` carrying the compiler's log with
    line numbers, not as an exception. Stops at the first non-None result.

    :param candidate: the candidate to compile.
    :param device: ``"cpu"`` or ``"cuda:N"``.
    :param workdir: a scratch directory for this candidate, already the working directory.
    :returns: a :class:`~kz_core.backend.CompiledCandidate`, a
        :class:`~kz_core.backend.CompileFailure`, or None.
    """


@hookspec(firstresult=True)
def backend_run(compiled: CompiledCandidate, model: Any, inputs: list[Any]) -> RunOutput | None:
    """Call ``model(*inputs)`` and prove that the backend's own kernels launched.

    Runs inside a sandboxed worker. Answer only for ``compiled.backend`` names you
    registered. Count the kernel launches of your backend during the call through its own
    launch path (Triton's launcher, the kz CUDA API, a profiler trace) and return them
    with the outputs. Exceptions raised by the candidate propagate; the worker turns them
    into a ``runtime_error`` result. Stops at the first non-None result.

    :param compiled: what :func:`backend_compile` returned for this candidate.
    :param model: the instantiated ``ModelNew``, in eval mode, on the device.
    :param inputs: the inputs for this call, on the device.
    :returns: a :class:`~kz_core.backend.RunOutput`, or None.
    """


@hookspec(firstresult=True)
def backend_kernels(candidate: Candidate, device: str, workdir: Path) -> TrustedKernels | CompileFailure | None:
    """The candidate's kernels, built from its source without running any of its code.

    Runs inside the trusted *executor* (``kz_core/evaluate/executor_ops.py``), which
    replays the plan that the candidate's forward was recorded as (its torch operations
    and its kernel launches, which your launch path reports with
    :func:`kz_core.evaluate.recording.record_kernel`) on the secret inputs, checks what it
    produced and times it. Build the kernels from the candidate's source as data (compile
    CUDA C++ with NVRTC, or take the ``@triton.jit`` functions out of the syntax tree)
    and never import or execute the candidate's module: that is what makes the
    executor's verdict and time trustworthy. A backend without this hook is evaluated
    with its forward running in the candidate's sandboxed process, and its results say so
    (finding ``unverified_execution``). Stops at the first non-None result.

    :param candidate: the candidate, with its ``backend`` and ``code``.
    :param device: ``"cpu"`` or ``"cuda:N"``.
    :param workdir: a scratch directory of the executor.
    :returns: a :class:`~kz_core.backend.TrustedKernels`, a
        :class:`~kz_core.backend.CompileFailure` (the source cannot be built so), or None.
    """


@hookspec
def check_outputs(problem: Problem, expected: Sequence[Any], actual: Sequence[Any], tolerance: Tolerance) -> list[Finding]:
    """Add checks of your own to the comparison of a candidate's output with the reference's.

    Called once per output of every trial, in a trusted process (the parent, or a
    reference worker for GPU outputs too large to move) on copies that candidate code never
    touched. The core always checks type, shape, dtype, non-finite values and closeness
    first (``kz_core/evaluate/correctness.py``), and no plugin can loosen that; add what it
    does not cover (a relative-norm test, a structure test for a problem family).

    :param problem: the problem the outputs belong to.
    :param expected: the reference output, as a one-element sequence of tensors.
    :param actual: the candidate's output, as a one-element sequence of tensors.
    :param tolerance: the absolute and relative tolerance for this output dtype.
    :returns: a list of :class:`~kz_core.model.Finding`, reported as
        ``mismatch.<check>``; any ``error`` makes the verdict ``incorrect``.
    """


# ---------------------------------------------------------------------------------------
# Training: policies sample, rewards are shaped, the frontier picks what to train on.
# ---------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def sample_completions(prompts: Sequence[Prompt], n: int, role: str, config: PolicyConfig) -> list[list[Completion]] | None:
    """Sample ``n`` completions for each prompt from a language model.

    Answer when ``config.sampler`` names your sampler (``hf``, ``vllm``, ...); return None
    otherwise. Render each prompt's messages with the model's chat template (plainly when
    it has none). Stops at the first non-None result.

    :param prompts: the chat prompts, as :class:`~kz_core.model.Prompt`.
    :param n: samples per prompt.
    :param role: ``"coder"`` or ``"proposer"``; a sampler may keep one model per role.
    :param config: the ``policy`` config section (:class:`kz_core.config.PolicyConfig`).
    :returns: one list of ``n`` :class:`~kz_core.model.Completion` per prompt, in order,
        or None.
    """


@hookspec(firstresult=True)
def shape_rewards(role: str, results: Sequence[EvalResult], config: RewardConfig) -> list[float] | None:
    """Turn a group of evaluation results for one prompt into one reward per sample.

    Answer when ``config.name`` names your reward (the default is ``cagrpo``); return None
    otherwise. Stops at the first non-None result.

    :param role: ``"coder"`` (results of the Coder's samples for one problem) or
        ``"proposer"``.
    :param results: the group, one :class:`~kz_core.model.EvalResult` per sample.
    :param config: the ``reward`` config section (:class:`kz_core.config.RewardConfig`).
    :returns: a list of finite floats, one per result and in the same order, or None.
    """


@hookspec(firstresult=True)
def select_frontier(stats: Sequence[ModuleStats], k: int, config: Any) -> FrontierSelection | None:
    """Choose the modules and API sets to train on next from the Coder's record.

    Prefer modules the Coder sometimes solves over those it always or never solves.
    Answer when ``config.name`` names your selector; return None otherwise. Stops at the
    first non-None result.

    :param stats: one :class:`~kz_core.model.ModuleStats` per module in the pool.
    :param k: how many modules to choose.
    :param config: the ``frontier`` config section.
    :returns: a :class:`~kz_core.model.FrontierSelection`, or None.
    """


@hookspec(firstresult=True)
def train_policy(role: str, items: Sequence[Any], config: KzConfig, run_dir: Path) -> TrainingSummary | None:
    """Train a policy for one role, starting from its current model, with rewards from kz.

    Answer when ``config.policy.sampler`` names your sampler (the plugin that samples a
    model also trains it); return None otherwise. Train for ``config.train.max_steps``
    optimizer steps (the ``train`` section's other options too), starting from the role's
    model in the ``policy`` section (``proposer_model`` for the Proposer when set, else
    ``model``). Write checkpoints, a ``metrics.jsonl`` with one line per step (at least
    ``step``, ``loss``, ``reward``) and the trained model into ``run_dir``; a call with the
    same ``run_dir`` after an interruption resumes from the last checkpoint. The
    co-evolution loop (``kz train``) calls this once per phase and round. Stops at the
    first non-None result. The method's rewards are ready-made callables in the core,
    :class:`kz_core.rewards.CoderReward` and :class:`kz_core.rewards.ProposerReward`: use
    them rather than writing your own.

    :param role: ``"coder"`` or ``"proposer"`` (reinforcement learning), or
        ``"coder_sft"`` (supervised fine-tuning of the Coder: expert iteration).
    :param items: for the Coder, the training problems (:class:`~kz_core.model.Problem`;
        rewards: the evaluator's results shaped by ``shape_rewards``, role ``coder``); for the
        Proposer, API sets (tuples of catalog API names) to prompt with (rewards:
        ``shape_rewards``, role ``proposer``, from the Coder's results on the modules); for
        ``coder_sft``, chat pairs (dicts with ``prompt`` and ``completion`` message lists)
        to fine-tune on with the ``sft`` section's options.
    :param config: the resolved kz config (:class:`kz_core.config.KzConfig`).
    :param run_dir: the folder this training run owns (created when missing).
    :returns: a :class:`~kz_core.model.TrainingSummary` whose ``model_path`` holds the
        trained model, or None.
    """
