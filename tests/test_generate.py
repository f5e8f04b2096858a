"""kz generate: prompts, sampling through the policy hook, parsing, evaluation, the report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kz_core import hookimpl
from kz_core.config import load_config
from kz_core.evaluate import Evaluator
from kz_core.evaluate.journal import Journal
from kz_core.generate import PolicyUnavailableError, evaluate_samples, sample_candidates
from kz_core.model import Completion, Verdict
from kz_core.plugins import get_plugin_manager
from kz_core.problems import load_problems
from kz_core.prompts import RULES, coder_prompt, proposer_prompt

REPO = Path(__file__).resolve().parents[1]
PROBLEMS = load_problems("examples")
ANSWER = (REPO / "examples" / "candidates" / "triton" / "2_scaled_relu.py").read_text()


def test_coder_prompts_state_the_rules_show_an_example_and_the_problem():
    config = load_config().policy
    prompt = coder_prompt(PROBLEMS.get("3_row_softmax"), "triton", config)
    system, user = prompt.messages
    assert system.role == "system" and user.role == "user" and prompt.prompt_id == "3_row_softmax"
    assert RULES in user.content and "@triton.jit" in user.content
    assert "Example. For this module" in user.content and "add_kernel" in user.content
    assert PROBLEMS.get("3_row_softmax").code.strip() in user.content
    cuda = coder_prompt(PROBLEMS.get("3_row_softmax"), "cuda", config).messages[1].content
    assert "load_cuda" in cuda and 'extern "C" __global__' in cuda
    bare = coder_prompt(PROBLEMS.get("3_row_softmax"), "triton", load_config(None, ["policy.one_shot=false", "policy.coder_system_prompt=Be brief."]).policy)
    assert "Example." not in bare.messages[1].content and bare.messages[0].content == "Be brief."


def test_proposer_prompt_names_the_apis():
    prompt = proposer_prompt(["torch.matmul", "torch.relu"], load_config().policy)
    assert prompt.prompt_id == "apis:torch.matmul+torch.relu"
    assert "torch.matmul, torch.relu" in prompt.messages[1].content and "get_init_inputs" in prompt.messages[1].content


class ScriptedPolicy:
    """A test policy: the first sample answers with a correct kernel, the second with prose."""

    @hookimpl
    def sample_completions(self, prompts, n, role, config):
        if config.sampler != "scripted":
            return None
        replies = [f"Here it is:\n```python\n{ANSWER}```", "I would use a kernel."]
        return [[Completion(p.prompt_id, role, replies[i % 2], i, 10) for i in range(n)] for p in prompts]


@pytest.mark.triton
def test_samples_are_parsed_evaluated_and_journaled(register_plugin, tmp_path):
    register_plugin(ScriptedPolicy(), "scripted-policy")
    config = load_config(None, ["policy.sampler=scripted", "eval.device=cpu", "eval.workers=1", "eval.timing=false"])
    problems = [PROBLEMS.get("2_scaled_relu")]
    samples = sample_candidates(problems, 2, "triton", config.policy, get_plugin_manager())
    assert [s.code is not None for s in samples] == [True, False]
    assert "not Python" in samples[1].reason
    with Journal(tmp_path / "j.sqlite") as journal, Evaluator(problems, config.eval, journal=journal) as evaluator:
        results = evaluate_samples(samples, evaluator)
        assert len(journal) == 2
    assert [r.verdict for r in results] == [Verdict.CORRECT, Verdict.FORMAT_ERROR]
    assert results[1].findings[0].check == "no_candidate"


def test_no_sampler_is_a_clear_error():
    config = load_config(None, ["policy.sampler=nobody"]).policy
    with pytest.raises(PolicyUnavailableError, match="policy.sampler='nobody'"):
        sample_candidates([PROBLEMS.get("1_vector_add")], 1, "triton", config, get_plugin_manager())


def test_a_plugins_user_error_is_one_line_and_exit_status_2(register_plugin, tmp_path):
    from click.testing import CliRunner

    from kz_core import HookUserError
    from kz_core.cli import _register_commands, cli

    class NoModel:
        @hookimpl
        def sample_completions(self, prompts, n, role, config):
            if config.sampler == "no-model":
                raise HookUserError("model 'missing' not found: set policy.model to a folder or a model id")

    register_plugin(NoModel(), "no-model")
    _register_commands()
    outcome = CliRunner().invoke(cli, ["generate", "--n", "1", f"run.root={tmp_path}", "policy.sampler=no-model", "problems.ids=1"])
    assert outcome.exit_code == 2, outcome.output
    assert "kz: model 'missing' not found: set policy.model" in outcome.output and "Traceback" not in outcome.output


@pytest.mark.slow
def test_kz_generate_eval_with_the_embedded_model_offline(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "COLUMNS": "200"}
    completed = subprocess.run(
        [sys.executable, "-m", "kz_core.cli", "generate", "--preset", "demo", "--n", "2", "--eval", "--device", "cpu",
         f"run.root={tmp_path}", "run.name=gen", "policy.max_new_tokens=48"],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    completions = [json.loads(line) for line in (tmp_path / "gen" / "completions.jsonl").read_text().splitlines()]
    assert [(c["problem"], c["sample_id"]) for c in completions] == [("1_vector_add", "0"), ("1_vector_add", "1"), ("2_scaled_relu", "0"), ("2_scaled_relu", "1")]
    results = [json.loads(line) for line in (tmp_path / "gen" / "results.jsonl").read_text().splitlines()]
    assert len(results) == 4 and all(r["verdict"] in {v.value for v in Verdict} for r in results)
    assert "pass@1" in completed.stdout and "pass@2" in completed.stdout and "overall" in completed.stdout
    for result in results:  # each sample's verdict as a line, as kz eval prints them
        assert f"{result['verdict']} {result['problem']}/{result['sample_id']}:" in completed.stderr
    with Journal(tmp_path / "gen" / "journal.sqlite") as journal:
        assert len(journal) == 4
