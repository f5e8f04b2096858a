"""Problems whose forward draws random numbers (KernelBench level 3's ``35_LSTM`` draws its
``h0`` and ``c0`` with ``torch.randn`` when they are not given).

The reference's output on a seed's inputs is computed right after those inputs are drawn,
so its draws come from the generators as drawing the inputs left them. An honest candidate
making the same draws gets the same numbers in the trials, and must get them in its timed
calls too: each timed call of a forward that draws is given the generators' states its
input set's draw left."""

from __future__ import annotations

import pytest

from kz_core.model import Candidate, Problem, Verdict

NOISY_PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        noise = torch.randn(x.shape, device=x.device)
        return x * 2.0 + 0.5 * noise


batch_size = 16
features = 64


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return []
'''

NOISY_CANDIDATE = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scaled_add_kernel(x_ptr, noise_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    noise = tl.load(noise_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * 2.0 + 0.5 * noise, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        noise = torch.randn(x.shape, device=x.device)
        out = torch.empty_like(x)
        n = x.numel()
        scaled_add_kernel[(triton.cdiv(n, 1024),)](x, noise, out, n, BLOCK=1024)
        return out
'''


@pytest.mark.triton
def test_a_candidate_drawing_the_references_random_numbers_is_correct():
    """Written against the version before, which gave the honest candidate ``state_drift``:
    its timed calls drew from the generators as the calls before them had left them, not
    as its inputs' draw had, and their outputs differed from the reference's. One timed
    call: the first input set's last output is the warm-up's, drawn as the reference drew
    too (KernelBench's ``35_LSTM`` at small sizes on a CPU was still ``state_drift``
    without that)."""
    from kz_core.evaluate import Evaluator

    from .conftest import eval_config

    problem = Problem("noisy_scale", NOISY_PROBLEM)
    honest = Candidate("noisy_scale", "triton", NOISY_CANDIDATE, sample_id="honest")
    other_draws = Candidate("noisy_scale", "triton", NOISY_CANDIDATE.replace("torch.randn(x.shape", "torch.rand(x.shape"), sample_id="uniform")
    with Evaluator([problem], eval_config("eval.cpu_timing_trials=1")) as evaluator:
        same, uniform = evaluator.evaluate([honest, other_draws])
    assert same.verdict is Verdict.CORRECT, same.message
    assert uniform.verdict is not Verdict.CORRECT, uniform.message


@pytest.mark.gpu
def test_gpu_a_forward_that_draws_is_timed_with_events_each_call_drawing_what_the_reference_drew():
    """A CUDA graph's draws advance on every replay: such a forward is timed with events,
    and each timed call draws from where its inputs' draw left the generators."""
    import torch

    from kz_core.evaluate.correctness import Agreement
    from kz_core.evaluate.timing import DRAWS_RANDOM, TimingSettings, time_forward

    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")

    def make(seed):
        torch.manual_seed(seed)
        return [torch.randn(4096, device="cuda")]

    def forward(x):
        return x * 2 + torch.randn(x.shape, device=x.device)

    settings = TimingSettings(method="graph", min_trials=12, max_trials=40, l2_flush_bytes=1 << 20)
    timed = time_forward(forward, make, [3, 5], [7, 11], "cuda", settings, agree=Agreement(), unseen=[13])
    assert timed.stats["clock"] == "cuda_events" and DRAWS_RANDOM in timed.stats["note"], timed.stats
    assert timed.disagreement == ""
    assert sorted(seed for seed, _ in timed.outputs) == [3, 5, 13]
    for seed, output in timed.outputs:
        inputs = make(seed)
        assert torch.equal(output, forward(*inputs))


@pytest.mark.gpu
@pytest.mark.triton
def test_gpu_a_candidate_drawing_the_references_random_numbers_is_correct():
    import torch

    from kz_core.config import load_config
    from kz_core.evaluate import Evaluator

    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")
    config = load_config(None, ["eval.device=cuda", "eval.workers=1", "eval.cache=false"]).eval
    with Evaluator([Problem("noisy_scale", NOISY_PROBLEM)], config) as evaluator:
        result, = evaluator.evaluate([Candidate("noisy_scale", "triton", NOISY_CANDIDATE, sample_id="honest")])
    assert result.verdict is Verdict.CORRECT, result.message
    assert result.runtime is not None and result.runtime.clock == "cuda_events", result.runtime
    assert result.baselines["eager"].clock == "cuda_events", result.baselines
