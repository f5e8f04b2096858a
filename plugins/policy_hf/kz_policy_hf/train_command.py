"""``kz train coder`` and ``kz train proposer``: GRPO with TRL's GRPOTrainer, the Coder with
CA-GRPO rewards from the evaluator, the Proposer with learnability rewards; ``kz train
sft``: supervised fine-tuning on chat pairs (``kz data synth``) with TRL's SFTTrainer."""

from __future__ import annotations

import click
from kz_core import config_options


@click.command(name="coder")
@click.option("--problems", "-p", "problems_source", default=None, help="Problem source (problems.source).")
@config_options
def coder(config, problems_source) -> None:
    """GRPO steps on the Coder (train.*, TRL's option names); resumes an interrupted run.

    On several GPUs: accelerate launch --num_processes N -m kz_core.cli train coder ...
    (each process evaluates its own completions on its own GPU, or its share of eval.devices).
    """
    from omegaconf import OmegaConf

    from kz_core import Journal, err_console as stderr, load_problems_from_config, open_run_dir, setup_logging

    from kz_policy_hf.distributed import evaluation_for_process, finish, main_process_first, training_processes
    from kz_policy_hf.training import train_coder

    if problems_source:
        config = OmegaConf.merge(config, OmegaConf.from_dotlist([f"problems.source={problems_source}"]))
    if not config.run.name:
        config = OmegaConf.merge(config, OmegaConf.from_dotlist(["run.name=train-coder"]))
    processes = training_processes(config)
    if not processes.main:
        setup_logging("WARNING")  # process 0 tells the story; the others' lines go to their log files
    config = evaluation_for_process(config, processes)
    problem_set = load_problems_from_config(config.problems)
    with main_process_first(processes):  # process 0 creates the run folder and its journal
        run_dir = open_run_dir(config, command="kz train coder", rank=processes.rank)
        journal = Journal(run_dir / "journal.sqlite")
    with journal:
        summary = train_coder(list(problem_set.problems), config, run_dir, journal)
    finish(processes)
    if not processes.main:
        return
    stderr.print(
        f"trained {summary['steps']} steps in {summary['seconds']:.0f} s "
        f"({summary['reward_wait_s']:.0f} s waiting for rewards"
        + (f", {processes.count} processes" if processes.count > 1 else "")
        + f"); model: {summary['final_model']}; metrics: {run_dir / 'metrics.jsonl'}",
        highlight=False,
    )


@click.command(name="proposer")
@config_options
def proposer(config) -> None:
    """GRPO steps on the Proposer (learnability under the current Coder); fills the run's pool."""
    from omegaconf import OmegaConf

    from kz_core import Journal, err_console as stderr, open_run_dir

    from kz_policy_hf.training import train_proposer

    if not config.run.name:
        config = OmegaConf.merge(config, OmegaConf.from_dotlist(["run.name=train-proposer"]))
    run_dir = open_run_dir(config, command="kz train proposer")
    with Journal(run_dir / "journal.sqlite") as journal:
        summary = train_proposer(config, run_dir, journal)
    stderr.print(
        f"trained {summary['steps']} steps in {summary['seconds']:.0f} s "
        f"({summary['reward_wait_s']:.0f} s waiting for rewards); model: {summary['final_model']}; "
        f"pool: {summary['pool_valid']} valid of {summary['pool_size']} modules in {run_dir / 'pool.sqlite'}; "
        f"metrics: {run_dir / 'metrics.jsonl'}",
        highlight=False,
    )


@click.command(name="sft")
@click.option("--data", "data_path", default=None, help="JSONL of chat pairs, e.g. from `kz data synth` (sft.data).")
@click.option("--role", type=click.Choice(["coder", "proposer", "both"]), default=None, help="Which rows to train on (sft.role).")
@config_options
def sft(config, data_path, role) -> None:
    """Supervised fine-tuning on chat pairs (TRL's SFTTrainer, LoRA by default); resumes an
    interrupted run. Start GRPO from the result with policy.model=<run dir>/final."""
    from omegaconf import OmegaConf

    from kz_core import err_console as stderr, open_run_dir

    from kz_policy_hf.sft import sft_rows, train_sft

    overrides = [f"sft.data={data_path}"] if data_path else []
    overrides += [f"sft.role={role}"] if role else []
    if not config.run.name:
        overrides.append("run.name=train-sft")
    config = OmegaConf.merge(config, OmegaConf.from_dotlist(overrides))
    rows = sft_rows(config.sft.data, config.sft.role, config.sft.split, list(config.sft.backends))
    run_dir = open_run_dir(config, command="kz train sft")
    summary = train_sft(config, run_dir, rows)
    stderr.print(
        f"fine-tuned {summary['steps']} steps on {summary['rows']} pairs in {summary['seconds']:.0f} s "
        f"(loss {summary['first_loss'] or 0:.3f} -> {summary['last_loss'] or 0:.3f}); model: {summary['final_model']}"
        + (f"; adapter: {summary['adapter']}" if summary["adapter"] else "")
        + f"; metrics: {run_dir / 'metrics.jsonl'}",
        highlight=False,
    )


def register(cli: click.Group) -> None:
    """Add ``coder``, ``proposer`` and ``sft`` to the core's ``kz train`` group."""
    from kz_core import train_group

    for command in (coder, proposer, sft):
        train_group.add_command(command)
