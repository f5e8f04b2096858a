"""Typed configuration: one structured config per component, YAML presets, overrides.

The resolved config is the structured defaults below, then a preset (a YAML file shipped in
``kz_core/presets/``, or a path to one), then ``key=value`` overrides from the command
line, in that order. Every field carries a comment with its meaning, unit and default.
``kz config show [--preset NAME] [key=value ...]`` prints the result.

This module must not import torch or any plugin: it is loaded by every command.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from kz_core.errors import KzError


class ConfigError(KzError, ValueError):
    """A preset or override that cannot be applied; the message says what to do."""


@dataclass
class RunConfig:
    # Folder that holds run directories; each run writes its config, log and journal there.
    root: str = "runs"
    # Name of this run's directory under `root`; empty: a timestamp such as 20261129-171900.
    name: str = ""
    # Seed for everything seedable that is not secret (sampling, shuffling).
    seed: int = 0


@dataclass
class LogConfig:
    # Console level: DEBUG, INFO, WARNING or ERROR (-v sets DEBUG, -q sets WARNING).
    level: str = "INFO"
    # Log file name inside the run directory (always written at DEBUG level); empty: none.
    file: str = "kz.log"


@dataclass
class ProblemsConfig:
    # Where problems come from: a directory of .py files, a .jsonl file,
    # `hf:ScalingIntelligence/KernelBench` (Hugging Face dataset), or `examples`
    # (the problems shipped with kz).
    source: str = "examples"
    # Keep only this KernelBench level (1-4); null: every level.
    level: int | None = None
    # Keep only these problem ids, e.g. "1-10,15"; empty: every id.
    ids: str = ""
    # Keep only names matching this pattern (case-insensitive glob; a pattern without
    # * ? [ matches as a substring); empty: every name.
    name: str = ""


@dataclass
class PolicyConfig:
    # Which sampler answers `sample_completions`: `hf` (transformers, kz-policy-hf).
    sampler: str = "hf"
    # Model for the Coder: a Hugging Face model id or a local checkpoint folder; empty or
    # `embedded:smollm2`: the embedded SmolLM2-135M-Instruct; `embedded:tiny`: a tiny random
    # model for smoke tests.
    model: str = ""
    # Model for the Proposer; empty: the Coder's model, one model with two roles.
    proposer_model: str = ""
    # A LoRA adapter folder merged into `model` before use (for the Proposer too when
    # proposer_model is empty), e.g. `adapters/smollm2-synth` or `kz train sft`'s adapter/;
    # empty: none.
    adapter: str = ""
    # A LoRA adapter folder merged into proposer_model (when that is set); empty: none.
    proposer_adapter: str = ""
    # Torch device for sampling: `auto` (the first GPU, else the CPU), `cpu`, `cuda:N`.
    device: str = "auto"
    # Weights' dtype while sampling: `auto` (bfloat16 on a GPU, float32 on a CPU) or a
    # torch dtype name.
    dtype: str = "auto"
    # Softmax temperature; 0 means greedy decoding.
    temperature: float = 0.8
    # Nucleus sampling: keep the smallest token set whose probability reaches top_p.
    top_p: float = 0.95
    # Most tokens generated per completion.
    max_new_tokens: int = 1024
    # Prompts per `generate` call (each expanded to n samples).
    batch_size: int = 8
    # Sampling seed; the same seed, prompts, model and batch_size give the same completions.
    seed: int = 0
    # System prompt for the Coder; empty: the built-in one (kz_core/prompts.py).
    coder_system_prompt: str = ""
    # System prompt for the Proposer; empty: the built-in one.
    proposer_system_prompt: str = ""
    # Show one worked example (the example problem 1_vector_add and its answer) in prompts.
    one_shot: bool = True


@dataclass
class RewardConfig:
    # Which reward answers `shape_rewards`: `cagrpo` (kz-reward-cagrpo). A reward plugin
    # adds its own keys to this section (`register_config`): CA-GRPO's tau, speed_weight,
    # speed_clip and the failure rewards come with kz-reward-cagrpo.
    name: str = "cagrpo"
    # Baseline the speedup is taken against: `eager` or `compile`.
    speed_baseline: str = "eager"
    # Reward-specific options. cagrpo reads `variant` (group | decoupled | global, default
    # group) and `global_momentum` (0..1, default 0.9); other rewards read their own.
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class EvalConfig:
    # Device to evaluate on: `auto` (cuda:0 when a GPU is present, else cpu), `cpu`,
    # `cuda` (every visible GPU, candidates spread over them) or `cuda:N`. On a CPU, Triton runs under its interpreter and CUDA is compiled
    # but not run; timings are labelled cpu and never turned into speedups.
    device: str = "auto"
    # Devices to spread candidates over, each with its own workers, references, memory
    # budget and timing lock (e.g. [cuda:1, cuda:2], to leave cuda:0 to training); empty:
    # `device` alone, where `cuda` means every visible GPU. [cpu, cpu] gives two CPU lanes
    # (for tests of the spreading).
    devices: list[str] = field(default_factory=list)
    # Where evaluators run: `local` (this host's devices) or `ray` (one evaluator actor per
    # GPU of a Ray cluster, the journal here: kz_core/evaluate/ray_engine.py).
    engine: str = "local"
    # With engine=ray: the cluster's address; `auto`: the cluster this machine is in; empty:
    # a local cluster started for the run.
    ray_address: str = ""
    # With engine=ray: evaluator actors; 0: one per GPU of the cluster (one per node with a
    # CPU when it has none).
    ray_actors: int = 0
    # Backend for candidates that do not name one (triton, cuda, cuda_inline, ...).
    backend: str = "triton"
    # Candidate worker processes per device; 0: one per CPU core (at most 8) on a CPU,
    # 4 on a GPU.
    workers: int = 0
    # Candidates in flight at once per device (each takes an executor when it starts, so a
    # candidate waiting for GPU memory leaves the others going); 0: one more than `workers`.
    in_flight: int = 0
    # Executors (each serves one candidate, which holds it from its start) beyond
    # max(workers, in_flight). With 8 workers, 9 candidates are in flight and one waits
    # for an executor, whose start on a GPU takes about 2 s (a CUDA context, cuBLAS and
    # cuDNN); 1 ends those waits but puts a ninth candidate on the GPU and a CUDA context
    # (0.6-0.85 GB) more on it: on an H100 the sweep's first 50 took 166 s with 2 against
    # 144-157 without, its GPU memory waits rose, and more candidates ran out of memory
    # (docs/benchmarks.md, fifty-first session).
    executor_spares: int = 0
    # Reference worker processes per device (they run reference modules and baselines;
    # candidate code never runs in them). Each serves one problem, so one per candidate
    # worker lets candidates of different problems go on at once; 0: twice `workers` on a
    # GPU (a problem's worker is kept while a candidate of it is in flight), as many on a CPU.
    reference_workers: int = 0
    # Reference workers started ahead of new problems (each new problem takes one; the
    # pool starts another in the background). On the H200, level 1 brought a new problem
    # every 3 s and a start took about 4 s: with one, candidates waited for starts.
    reference_spares: int = 2
    # Correctness trials per candidate, each with fresh inputs from a secret seed.
    trials: int = 5
    # Tolerance table by output dtype: `default` (fp64 1e-6, fp32 1e-4, fp16 5e-3,
    # bf16 2e-2, fp8 1e-1, as atol = rtol) or `kernelbench` (fp32 1e-4, fp16/bf16 1e-2).
    tolerance: str = "default"
    # Absolute tolerance for every floating dtype, replacing the table; negative: the table.
    atol: float = -1.0
    # Relative tolerance for every floating dtype, replacing the table; negative: the table.
    rtol: float = -1.0
    # Add one trial at other sizes (the problem's module-level size constants rebound), so
    # that kernels hard-coding the default sizes fail.
    size_variation: bool = True
    # Fuzz examples per candidate after its correctness trials (kz_core/fuzz.py: other
    # sizes, value distributions and layouts); a failure makes it incorrect. 0: no fuzzing.
    fuzz: int = 0
    # Compute-heavy torch ops in ModelNew.forward (found with the torch profiler):
    # `strict` rejects the candidate, `warn` records a warning.
    guards: str = "strict"
    # A `cuda_inline` candidate whose forward cannot be recorded for the trusted executor
    # (its host code does what a plan cannot describe: `cudaMemcpyToSymbol`, a workspace
    # kept between calls): false (default) rejects it as `not_replayable`, as a Triton
    # candidate would be; true runs it in its own sandboxed process instead, where it
    # could change its own evidence, launch counts and times and knows its inputs' seeds,
    # so a `correct` there is the candidate's word (the result carries the warning
    # `unverified_execution`; CA-GRPO pays it no speed term). docs/security.md.
    unverified_fallback: bool = False
    # Allow TF32 in matmuls and convolutions while computing references; false pins exact
    # fp32 (stated in every result's findings as reference_tf32).
    reference_tf32: bool = False
    # Wall-clock limit for loading and compiling one candidate, seconds.
    compile_timeout_s: float = 180.0
    # Wall-clock limit for one candidate's correctness trials, and for its timing, seconds.
    run_timeout_s: float = 120.0
    # Address-space limit of CPU worker processes, GiB (0: none; never applied on a GPU,
    # where CUDA maps very large address ranges).
    memory_limit_gb: float = 16.0
    # Memory one sandboxed worker may hold in all, GiB: its processes and their children,
    # the memory files they write, its scratch and /dev/shm memory file systems (a cgroup of
    # its own, where the machine gives kz one; past it the kernel ends the worker and its
    # result says so). 0: memory_limit_gb + 2 on a CPU, half the machine's memory on a GPU
    # or where memory_limit_gb is 0; negative: no limit.
    worker_memory_gb: float = 0.0
    # Memory all sandboxed workers of one evaluator may hold together, GiB (their cgroups'
    # common parent, where the machine gives kz cgroups): past it the kernel ends the
    # worker holding the most, a candidate's before a reference worker's or an executor's,
    # and never kz itself. 0: the machine's memory less a quarter of it (at most 16 GiB
    # kept back); negative: no limit. Each worker's own limit stays worker_memory_gb.
    workers_memory_gb: float = 0.0
    # Memory this process holds for large worker replies in flight at once, GiB; replies
    # past it are received into an unnamed file in scratch_dir (slower, same verdict).
    # 0: a quarter of the machine's memory; negative: no budget.
    reply_memory_gb: float = 0.0
    # Largest file a worker may write, MiB.
    file_size_limit_mb: int = 1024
    # CPU seconds one candidate may use (SIGXCPU ends its worker beyond it); 0: no limit.
    cpu_time_limit_s: int = 600
    # Replace a candidate worker after this many candidates (0: never). A worker whose
    # candidate failed, hung, crashed or was rejected is always replaced.
    recycle_after: int = 50
    # MiB of free GPU memory filled with NaN before each candidate call, so that outputs
    # left unwritten read back as NaN, not as stale results.
    poison_mb: int = 256
    # Isolation mechanisms NOT to use for candidate processes, though the kernel has them:
    # any of landlock, seccomp, namespaces, private_shm (a /dev/shm of each worker's own),
    # cgroups (a cgroup per worker: its memory and processes as a whole;
    # kz detects what the kernel lacks by itself and says so; this is for testing the
    # fallbacks and for machines where one misbehaves).
    isolation_off: list[str] = field(default_factory=list)
    # Most MiB of tensors (parameters, buffers) a candidate's recorded forward may hold;
    # they travel from its sandboxed process to the executor that replays it. KernelBench's
    # published sizes need 8 GiB and a bit (level 3's 2_ShallowWideMLP; three level-2
    # problems hold 4 GiB and a bit, over the 4096 this was until the forty-second session).
    plan_constant_mb: int = 16384
    # On a GPU, a problem whose reference Model holds at least this many MiB of parameters
    # and buffers (at its own sizes) has its models, reference and candidates alike, built
    # with the GPU as torch's default device: their weights are drawn by torch's CUDA
    # generator there, not by the CPU's one number at a time and then copied (KernelBench's
    # way, kept below it: 8 GiB of weights took 11 s per model). Same seed, same layers,
    # same weights either way; a ModelNew that cannot be built there is a runtime_error
    # saying so. 0: every model on the CPU.
    device_init_mb: int = 1024
    # Time correct candidates (and, on a GPU, the baselines).
    timing: bool = True
    # Baselines timed on the same GPU for speedups: `eager` and/or `compile`.
    baselines: list[str] = field(default_factory=lambda: ["eager", "compile"])
    # GPU timing method: `graph` (the forward captured once in a CUDA graph, replays timed
    # with events: the GPU's time without the host's launch and synchronisation latency;
    # a forward that cannot be captured falls back to `events`, and its baselines with
    # it) or `events` (events around each call with a device-wide synchronisation inside).
    # See docs/evaluation.md.
    timing_method: str = "graph"
    # Graph timing: calls are added to the graph (each on its own copy of the inputs)
    # until one replay takes at least this many milliseconds.
    graph_replay_ms: float = 1.0
    # Graph timing: at most this many forward calls in one graph.
    graph_max_calls: int = 512
    # GPU timing: warm-up per callable, milliseconds.
    warmup_ms: float = 25.0
    # GPU timing: at least this many timed trials.
    min_trials: int = 10
    # GPU timing: at most this many timed trials.
    max_trials: int = 1000
    # GPU timing: stop once this many milliseconds were measured (or the spread is small).
    time_budget_ms: float = 1000.0
    # GPU timing: stop early once IQR / median falls below this.
    target_relative_iqr: float = 0.005
    # CPU timing (recorded, labelled cpu): timed calls after one warm-up call.
    cpu_timing_trials: int = 3
    # Peak memory bandwidth of the GPU, GB/s, for the speed-of-light check (a candidate
    # faster than moving its inputs and outputs once is flagged for review); 0: look the
    # device up in a table of known GPUs.
    peak_bandwidth_gbps: float = 0.0
    # Reuse finished results from the run's journal (false: evaluate everything again).
    cache: bool = True
    # Folder for the workers' scratch folders; empty: the system's temporary folder.
    scratch_dir: str = ""
    # Reference outputs kept in memory across candidates, MiB (least recently used go).
    reference_cache_mb: int = 4096
    # On a GPU, outputs larger than this (MiB per call) are not sent to this process: a
    # reference worker copies them out of the candidate's GPU memory (CUDA IPC) and
    # compares them there.
    transfer_limit_mb: int = 16
    # On a GPU, a candidate of a problem whose inputs and outputs of one call take more
    # than this (MiB) reserves 1.5 times that from the GPU's memory budget while it is
    # recorded, and again while it is checked and timed (kz_core/evaluate/memory.py), so
    # that concurrent workers cannot exhaust the GPU's memory; smaller ones reserve nothing.
    large_problem_mb: int = 1024
    # What a candidate of such a problem reserves, in call footprints (inputs and outputs
    # of one call): an estimate of its recording's and its replay's peak; a candidate that
    # meets a full GPU anyway is evaluated again with the whole budget to itself. 1.5
    # since the twenty-third session (2 before): KernelBench level 1 on an H200 ran 20.6
    # candidates/min against 19.4-19.9 (docs/benchmarks.md).
    reservation_footprints: float = 1.5
    # How many later reservations that fit may be granted before a waiting one that does
    # not fit yet (each overtaking counts against every request it passes); 0: first come,
    # first served.
    reservation_overtakes: int = 0
    # The GPU memory set aside for candidates of problems below eval.large_problem_mb (they
    # reserve nothing), out of the reservations' reach: "workers", a 1.5 GiB share for
    # every candidate worker; "in_flight", a share only for the candidates in flight that
    # are not known to be of a large problem (those reserve what they use), so that a
    # batch of large problems may reserve nearly all of it. On an H100 with 8 workers the
    # shares were 12.9 GB of a 40.5 GB budget (KernelBench level 1 at 16.0 candidates/min
    # with 8 workers, 20.6 with 4; docs/benchmarks.md, fiftieth session). With "in_flight"
    # the same level 1 run had 11.2 GB more to reserve and waited 18 % less for memory, but
    # was done only 3-6 s earlier at its marks, within noise (fifty-second session): "workers" stays.
    reservation_set_aside: str = "workers"
    # On a GPU, where a verified candidate's timed outputs too large to move (above
    # eval.transfer_limit_mb) are compared with the reference's: "in_hold", inside the
    # exclusive timing hold, while every other candidate's GPU work waits; "after_hold",
    # after it, with the GPU held shared and a memory reservation for what they hold
    # (granted at once or not at all: not granted, they are compared in the hold). In the
    # sweep on an H100 the hold went from 1.06 to 1.03 s a candidate with it, and the
    # sweep ran 23.0 candidates/min against 23.5: no gain measured, so it is not the
    # default (docs/benchmarks.md, fifty-first session).
    timed_outputs_compared: str = "in_hold"
    # How the `compile` baseline is compiled ahead of its timing (once per problem, by its
    # reference worker): "fake_first", first on torch's fake tensors (shapes without memory:
    # nothing runs on the GPU) with no GPU lock held, which fills inductor's and Triton's
    # caches, then its first real call with the GPU held shared, which loads them; "shared",
    # all of it with the GPU held shared (on an H100, 5.3 s a KernelBench level 1 problem in
    # which every timing waited: docs/benchmarks.md, fifty-second session).
    compile_ahead: str = "fake_first"


@dataclass
class TrainConfig:
    # Optimizer steps of Coder training (TRL's max_steps).
    max_steps: int = 20
    # Completions sampled per prompt: the group CA-GRPO gates on (TRL's num_generations).
    num_generations: int = 4
    # Completions per device per step; a multiple of num_generations (TRL's name).
    per_device_train_batch_size: int = 4
    # Micro-batches accumulated per optimizer step (TRL's name).
    gradient_accumulation_steps: int = 1
    # Adam learning rate.
    learning_rate: float = 1.0e-6
    # KL coefficient against the reference model; 0: no reference model (TRL's name).
    beta: float = 0.0
    # PPO clipping range (TRL's name).
    epsilon: float = 0.2
    # Policy loss: grpo, dapo, dr_grpo, bnpo, ... (TRL's name).
    loss_type: str = "dapo"
    # Reward scaling: group, batch or none; use none with reward.options.variant=decoupled.
    scale_rewards: str = "group"
    # Longest completion, tokens (TRL's max_completion_length).
    max_completion_length: int = 512
    # Save a checkpoint every this many steps (resumable).
    save_steps: int = 10
    # Train LoRA adapters (peft) instead of all weights.
    lora: bool = False
    # LoRA rank.
    lora_r: int = 16
    # LoRA alpha.
    lora_alpha: int = 32
    # Other GRPOConfig arguments, passed through by their TRL names.
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class SftConfig:
    # Chat pairs to fine-tune on: a JSONL with `prompt` and `completion` columns in chat
    # form and a `role` column (what `kz data synth` writes).
    data: str = ""
    # Which rows: `coder`, `proposer` or `both` (one model with two roles). The model is
    # policy.model (policy.proposer_model for the Proposer when it is set).
    role: str = "coder"
    # Keep only rows of this split (`train`; the held-out families stay out); empty: all.
    split: str = "train"
    # Keep only Coder rows of these backends (e.g. [triton]); empty: every backend.
    backends: list[str] = field(default_factory=list)
    # Passes over the rows (TRL's num_train_epochs); max_steps > 0 stops earlier.
    num_train_epochs: float = 1.0
    # Optimizer steps; -1: as many as num_train_epochs needs (TRL's max_steps).
    max_steps: int = -1
    # Rows per device per step (TRL's name).
    per_device_train_batch_size: int = 4
    # Micro-batches accumulated per optimizer step (TRL's name).
    gradient_accumulation_steps: int = 1
    # Adam learning rate (LoRA takes a larger one than full fine-tuning).
    learning_rate: float = 2.0e-4
    # Longest prompt plus completion, tokens; longer rows are cut (TRL's max_length).
    max_length: int = 3072
    # Train LoRA adapters (peft) instead of all weights.
    lora: bool = True
    # LoRA rank.
    lora_r: int = 16
    # LoRA alpha.
    lora_alpha: int = 32
    # Save a checkpoint every this many steps (a re-run resumes from the last).
    save_steps: int = 50
    # Other SFTConfig arguments, passed through by their TRL names.
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class FrontierConfig:
    # Which selector answers `select_frontier`: `beta` (the core's, kz_core/frontier.py), or
    # `uniform` (modules drawn uniformly: the ablation the frontier is measured against).
    name: str = "beta"
    # Frontier score of a pass rate p: `variance` is p(1-p); `linear` is 1-2|p-1/2|. Both
    # peak at p = 1/2 and vanish at 0 and 1.
    score: str = "variance"
    # Beta prior of a module's pass rate (pseudo-counts of correct samples).
    prior_alpha: float = 1.0
    # Beta prior of a module's pass rate (pseudo-counts of incorrect samples).
    prior_beta: float = 1.0
    # Share of chosen modules drawn from older modules (replay), 0..1.
    replay_share: float = 0.2
    # Weight floor of each API when sampling API sets, so that untried APIs get drawn.
    explore: float = 0.05


@dataclass
class ProposerConfig:
    # Fewest torch APIs per requested module.
    min_apis: int = 1
    # Most torch APIs per requested module.
    max_apis: int = 5
    # Which reward answers `shape_rewards` for the Proposer: `learnability`.
    reward: str = "learnability"
    # Learnability of a module the Coder solves with rate p: `absolute_zero` is 1-p for
    # 0<p<1 (else 0); `r_zero` is 1-2|p-1/2|.
    learnability: str = "absolute_zero"
    # Coder samples per valid module when computing the Proposer's reward.
    coder_samples: int = 4
    # Penalty for a module nearly identical to another in the same batch.
    repetition_penalty: float = 0.5
    # Similarity (0..1) above which a module counts as a duplicate of one in the pool.
    duplicate_threshold: float = 0.9
    # Problem source to decontaminate against (e.g. KernelBench's problems.jsonl); empty: none.
    decontaminate: str = ""
    # Runtime window of a valid module's forward, milliseconds (on the validating device).
    min_runtime_ms: float = 0.0
    # Runtime window of a valid module's forward, milliseconds.
    max_runtime_ms: float = 2000.0
    # Largest total size of a valid module's inputs and outputs, MiB.
    max_memory_mb: float = 2048.0


@dataclass
class CoevolveConfig:
    # Co-evolution rounds (`kz train`); each round trains the Proposer, refreshes the pool,
    # gathers frontier statistics, trains the Coder and evaluates it on held-out problems.
    rounds: int = 3
    # Proposer GRPO steps per round (train.max_steps of the Proposer's phase); 0: skip.
    proposer_steps: int = 4
    # Coder GRPO steps per round on the frontier modules (train.max_steps of the Coder's
    # phase); 0: skip.
    coder_steps: int = 8
    # Modules the current Proposer writes per round for the pool (validated first).
    modules_per_round: int = 8
    # Coder samples per valid pool module that has no Coder statistics yet (the frontier's
    # pass-rate estimates).
    coder_samples: int = 4
    # Modules the frontier selects for each round's Coder training (select_frontier's k).
    frontier_k: int = 8
    # Problem source of the fixed held-out set (same forms as problems.source); these
    # problems are never training problems.
    heldout_source: str = "examples"
    # Held-out problem ids within heldout_source, e.g. "4-6"; empty: every problem.
    heldout_ids: str = "4-6"
    # Coder samples per held-out problem each round (n of pass@n; at least 1).
    heldout_samples: int = 4
    # One model with two roles (true: each phase trains the latest model, whatever its
    # role) or separate Proposer and Coder checkpoints (false).
    shared_model: bool = False
    # Expert iteration between the frontier and the Coder's GRPO: this many Coder samples
    # per frontier module, the ones the evaluator judges correct kept as chat pairs, and
    # the Coder fine-tuned on them (the `sft` section's options); 0: no expert iteration.
    expert_samples: int = 0
    # Add the problems of problems.* (held-out ones left out) to the pool before round 1,
    # so that the Coder has modules to train on before the Proposer writes valid ones.
    seed_problems: bool = True


@dataclass
class KzConfig:
    run: RunConfig = field(default_factory=RunConfig)
    log: LogConfig = field(default_factory=LogConfig)
    problems: ProblemsConfig = field(default_factory=ProblemsConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    sft: SftConfig = field(default_factory=SftConfig)
    frontier: FrontierConfig = field(default_factory=FrontierConfig)
    proposer: ProposerConfig = field(default_factory=ProposerConfig)
    coevolve: CoevolveConfig = field(default_factory=CoevolveConfig)


PRESET_PACKAGE = "kz_core.presets"


@dataclass(frozen=True)
class ConfigSection:
    """Configuration a plugin contributes (``register_config``): keys with types, defaults
    and help, in a section of its own or added to a core section.

    :ivar section: the top-level key (``reward`` adds to the core's ``reward`` section; a
        new name makes a new section).
    :ivar fields: a dataclass whose fields are the keys, with their types and defaults; the
        comment above each field, or ``field(metadata={"help": ...})``, is its help.
    :ivar validate: called with the section after every load (defaults, preset and
        overrides applied); raises :class:`ConfigError` naming the key to fix.
    :ivar plugin: the registering plugin's name (filled in by kz).
    """

    section: str
    fields: type
    validate: Any = None
    plugin: str = ""


def config_sections() -> list[ConfigSection]:
    """What the installed plugins contribute through ``register_config``, in load order."""
    from kz_core.plugins import registered

    found: list[ConfigSection] = []
    for item, plugin in registered("register_config"):
        if not isinstance(item, ConfigSection) or not dataclasses.is_dataclass(item.fields):
            raise ConfigError(f"plugin {plugin!r} registered {item!r}: register ConfigSection(section, fields=<a dataclass>)")
        found.append(dataclasses.replace(item, plugin=plugin))
    return found


def _resolved_fields(cls: type) -> list[tuple[str, Any, Any]]:
    """``(name, type, dataclasses.Field)`` of a dataclass, its string annotations resolved."""
    import typing

    hints = typing.get_type_hints(cls)
    return [(f.name, hints[f.name], f) for f in dataclasses.fields(cls)]


def _copy_field(f: Any) -> Any:
    if f.default is not dataclasses.MISSING:
        return field(default=f.default, metadata=f.metadata)
    if f.default_factory is not dataclasses.MISSING:
        return field(default_factory=f.default_factory, metadata=f.metadata)
    raise ConfigError(f"config key {f.name!r} has no default: every key needs one")


def _cached_class(name: str, build: Any) -> type:
    """A generated dataclass kept as an attribute of this module under ``name``, so that
    pickle finds it (a config travels to worker processes, where the same plugins build the
    same name again: see ``__getattr__`` below)."""
    found = globals().get(name)
    if found is None:
        found = build()
        found.__module__ = __name__
        found.__qualname__ = found.__name__ = name
        globals()[name] = found
    return found


def __getattr__(name: str) -> Any:
    """Classes generated by :func:`schema` (``KzConfig__...``), built on first use: how an
    unpickled config finds them in a fresh process."""
    if "__" in name and not name.startswith("__"):
        schema()
        if name in globals():
            return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def schema(sections: list[ConfigSection] | None = None) -> type:
    """:class:`KzConfig` with the plugins' sections and keys added (a new dataclass, named
    after what was added, so that the same plugins give the same class)."""
    import hashlib

    sections = config_sections() if sections is None else sections
    if not sections:
        return KzConfig
    signature = repr(sorted((item.section, item.plugin, item.fields.__qualname__, tuple(f.name for f in dataclasses.fields(item.fields))) for item in sections))
    suffix = hashlib.sha256(signature.encode()).hexdigest()[:12]
    core = {name: kind for name, kind, _ in _resolved_fields(KzConfig)}
    added: dict[str, list[ConfigSection]] = {}
    for item in sections:
        added.setdefault(item.section, []).append(item)
    top: list[tuple[str, Any, Any]] = []
    for name, items in added.items():
        base = core.get(name)
        taken = {f.name: "kz-core" for f in dataclasses.fields(base)} if base is not None else {}
        extra = []
        for item in items:
            for key, kind, f in _resolved_fields(item.fields):
                if key in taken:
                    raise ConfigError(f"config key {name}.{key} is defined by both {taken[key]} and plugin {item.plugin!r}")
                taken[key] = f"plugin {item.plugin!r}"
                extra.append((key, kind, _copy_field(f)))
        class_name = f"{(base or items[0].fields).__name__}__{name}_{suffix}"
        merged = _cached_class(class_name, lambda: dataclasses.make_dataclass(class_name, extra, bases=(base,) if base else ()))
        top.append((name, merged, field(default_factory=merged)))
    return _cached_class(f"KzConfig__{suffix}", lambda: dataclasses.make_dataclass(f"KzConfig__{suffix}", top, bases=(KzConfig,)))


def grpo_groups(train: Any, steps: int | None = None) -> int:
    """Prompts that ``steps`` GRPO optimizer steps consume (None: ``train.max_steps``): one
    per group of ``num_generations`` completions in each step's batches; at least 1."""
    steps = train.max_steps if steps is None else steps
    return max(1, steps * train.per_device_train_batch_size * train.gradient_accumulation_steps // max(1, train.num_generations))


def available_presets() -> list[str]:
    """Names of the presets shipped inside the package (YAML files without ``.yaml``)."""
    folder = importlib.resources.files(PRESET_PACKAGE)
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def _read_preset(preset: str) -> DictConfig:
    path = Path(preset)
    if preset.endswith((".yaml", ".yml")) and path.is_file():
        text = path.read_text(encoding="utf-8")
    else:
        resource = importlib.resources.files(PRESET_PACKAGE) / f"{preset}.yaml"
        if not resource.is_file():
            raise ConfigError(
                f"unknown preset {preset!r}: choose one of {', '.join(available_presets())}, "
                "or give the path of a .yaml file"
            )
        text = resource.read_text(encoding="utf-8")
    try:
        loaded = OmegaConf.create(text)
    except OmegaConfBaseException as exc:
        raise ConfigError(f"preset {preset!r} is not valid YAML: {exc}") from exc
    if loaded is None:
        return OmegaConf.create({})
    if not isinstance(loaded, DictConfig):
        raise ConfigError(f"preset {preset!r} must be a mapping of sections, not a list")
    return loaded


def _check_override(item: str) -> None:
    if "=" not in item or item.startswith("="):
        raise ConfigError(f"override {item!r} is not of the form key=value (e.g. run.seed=3)")


def load_config(preset: str | None = None, overrides: list[str] | tuple[str, ...] = ()) -> KzConfig:
    """Resolve the config: structured defaults, then ``preset``, then ``overrides``.

    :param preset: a shipped preset's name, or the path of a YAML file; None: defaults only.
    :param overrides: ``key=value`` strings in omegaconf's dotlist syntax.
    :returns: a read-only structured config that behaves as a :class:`KzConfig`.
    :raises ConfigError: unknown preset, unknown key, or a value of the wrong type.
    """
    sections = config_sections()
    config = OmegaConf.structured(schema(sections))
    layers: list[tuple[str, DictConfig]] = []
    if preset:
        layers.append((f"preset {preset!r}", _read_preset(preset)))
    for item in overrides:
        _check_override(item)
    # `key=` means the empty string (omegaconf would read it as null).
    dotlist = [f"{item}''" if item.endswith("=") else item for item in overrides]
    if dotlist:
        try:
            layers.append(("the command line", OmegaConf.from_dotlist(dotlist)))
        except OmegaConfBaseException as exc:
            raise ConfigError(f"cannot parse overrides {list(overrides)}: {exc}") from exc
    for origin, layer in layers:
        try:
            config = OmegaConf.merge(config, layer)
        except OmegaConfBaseException as exc:
            key = getattr(exc, "full_key", "") or ""
            raise ConfigError(
                f"{origin}: {_first_line(exc)}"
                + (f" (key {key!r}; `kz config show` lists every key)" if key else "")
            ) from exc
    validate(config, sections)
    OmegaConf.set_readonly(config, True)
    return config  # type: ignore[return-value]


def section_type(name: str) -> type:
    """The dataclass of section ``name`` with the installed plugins' keys in it: build a
    section by hand (``section_type("reward")(tau=0.3)``) as ``load_config`` would."""
    for key, kind, _ in _resolved_fields(schema()):
        if key == name:
            return kind
    raise ConfigError(f"no config section {name!r}")


def _one_of(*choices: str) -> Any:
    def check(value: Any) -> str | None:
        return None if value in choices else f"use one of {', '.join(choices)}"

    return check


def _at_least(low: int) -> Any:
    def check(value: Any) -> str | None:
        return None if value >= low else f"must be at least {low}"

    return check


def _positive(value: Any) -> str | None:
    return None if value > 0 else "must be above 0"


#: The names of kz_core/evaluate/correctness.py's TOLERANCE_TABLES, here so that loading a
#: config does not import that module and torch with it (seconds of every ``kz`` command);
#: tests/test_config.py checks that the two agree.
TOLERANCE_TABLE_NAMES = ("default", "kernelbench")


def _tolerances(value: Any) -> str | None:
    return None if value in TOLERANCE_TABLE_NAMES else f"use one of {', '.join(TOLERANCE_TABLE_NAMES)}"


#: Choices and ranges of the core's keys, checked whenever a config loads (and by the
#: components that take a section directly, through :func:`check_section`).
RULES: dict[str, dict[str, Any]] = {
    "eval": {
        "tolerance": _tolerances,
        "guards": _one_of("strict", "warn"),
        "trials": _at_least(1),
        "timing_method": _one_of("graph", "events"),
        "workers": _at_least(0),
        "in_flight": _at_least(0),
        "executor_spares": _at_least(0),
        "reference_workers": _at_least(0),
        "reference_spares": _at_least(1),
        "engine": _one_of("local", "ray"),
        "ray_actors": _at_least(0),
        "reservation_footprints": _positive,
        "reservation_overtakes": _at_least(0),
        "reservation_set_aside": _one_of("workers", "in_flight"),
        "timed_outputs_compared": _one_of("in_hold", "after_hold"),
        "compile_ahead": _one_of("fake_first", "shared"),
    },
    "reward": {"speed_baseline": _one_of("eager", "compile")},
    "coevolve": {
        **{name: _at_least(0) for name in ("rounds", "proposer_steps", "coder_steps", "modules_per_round", "coder_samples", "frontier_k", "expert_samples")},
        "heldout_samples": _at_least(1),
    },
}


def check_section(name: str, section: Any) -> None:
    """Check one section's values against :data:`RULES`.

    :raises ConfigError: ``eval.tolerance='loose': use one of default, kernelbench``.
    """
    for key, rule in RULES.get(name, {}).items():
        if not hasattr(section, key):
            continue
        value = getattr(section, key)
        problem = rule(value)
        if problem:
            raise ConfigError(f"{name}.{key}={value!r}: {problem}")


def validate(config: Any, sections: list[ConfigSection] | None = None) -> None:
    """Every section's rules, then each plugin's own check of its keys."""
    for name in RULES:
        check_section(name, getattr(config, name))
    for item in config_sections() if sections is None else sections:
        if item.validate is not None:
            item.validate(getattr(config, item.section))


def config_help(sections: list[ConfigSection] | None = None) -> dict[str, str]:
    """Each key's help, by dotted name: the comment above its field (or its ``help``
    metadata), for the core's sections and the plugins'."""
    import inspect
    import re
    import textwrap

    def of_class(cls: type) -> dict[str, str]:
        found: dict[str, str] = {f.name: str(f.metadata["help"]) for f in dataclasses.fields(cls) if f.metadata.get("help")}
        for klass in cls.__mro__:
            if klass is object or not dataclasses.is_dataclass(klass):
                continue
            try:
                source = textwrap.dedent(inspect.getsource(klass))
            except (OSError, TypeError):
                continue
            comments: list[str] = []
            for line in source.splitlines():
                stripped = line.strip()
                if line.startswith("    # "):
                    comments.append(stripped[2:])
                    continue
                match = re.match(r"    (\w+)\s*:", line)
                if match and comments:
                    found.setdefault(match.group(1), " ".join(comments))
                comments = []
        return found

    result: dict[str, str] = {}
    for name, kind, _ in _resolved_fields(KzConfig):
        for key, text in of_class(kind).items():
            result[f"{name}.{key}"] = text
    for item in config_sections() if sections is None else sections:
        for key, text in of_class(item.fields).items():
            result.setdefault(f"{item.section}.{key}", f"{text} ({item.plugin})" if item.plugin else text)
    return result


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def to_yaml(config: Any, with_help: bool = False) -> str:
    """The resolved config as YAML, the way ``kz config show`` prints it; ``with_help``:
    each key's help as a comment above it (still valid YAML, a preset as it stands)."""
    text = OmegaConf.to_yaml(config, resolve=True)
    if not with_help:
        return text
    helps = config_help()
    lines, section = [], ""
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            section = line[:-1]
        elif line.startswith("  ") and not line.startswith("   ") and ":" in line:
            key = line.strip().split(":", 1)[0]
            help_text = helps.get(f"{section}.{key}")
            if help_text:
                lines.append(f"  # {help_text}")
        lines.append(line)
    return "\n".join(lines) + "\n"


def to_container(config: Any) -> dict[str, Any]:
    """The resolved config as plain dicts and lists (for JSON and hashing)."""
    if dataclasses.is_dataclass(config):
        return dataclasses.asdict(config)
    return OmegaConf.to_container(config, resolve=True)  # type: ignore[return-value]
