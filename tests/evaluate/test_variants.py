"""Size variations (``kz_core.evaluate.variants``): other sizes that catch a kernel
hard-coding the default ones, keeping the alignment honest kernels may rely on."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kz_core.evaluate.variants import KEPT_ALIGNMENT, input_size_constants, size_constants, size_variations, varied


def test_small_sizes_grow_by_one():
    assert [varied(v) for v in (2, 3, 7, 15)] == [3, 4, 8, 16]


def test_large_sizes_keep_their_alignment_and_leave_powers_of_two():
    """Written against the version before, which made every large size odd: 4096 became
    4353, so a kernel reading through a TMA tensor descriptor (16-byte strides) or with
    float4 loads, right at every size the problem gives, failed the variation."""
    assert varied(4096) == 4352 and varied(4096) % 16 == 0
    assert varied(300) == 320 and varied(300) % 4 == 0
    assert varied(5000) == 5312 and varied(5000) % 8 == 0
    assert varied(4095) == 4350  # an odd size needs no alignment
    assert varied(128) == 136  # 6 %, 8-element (32-byte) aligned


@given(st.integers(2, 1 << 40))
def test_a_varied_size_differs_stays_near_and_keeps_alignment(value):
    other = varied(value)
    assert value < other <= value + max(1, value // 8) + KEPT_ALIGNMENT
    if value >= 16:
        assert other & (other - 1) != 0  # not a power of two
        alignment = min(value & -value, KEPT_ALIGNMENT, 1 << ((value // 16).bit_length() - 1))
        assert other % alignment == 0


def test_variations_rebind_every_size_constant_then_each_alone():
    code = "batch_size = 16\nfeatures = 300\nscale = 1.5\nflag = 1\nN = 2048 * 2\n"
    assert size_constants(code) == {"batch_size": 16, "features": 300, "N": 4096}
    every, *singles = size_variations(code)
    assert every == {"batch_size": 17, "features": 320, "N": 4352}
    assert singles == [{"batch_size": 17}, {"features": 320}, {"N": 4352}]


def test_a_modules_configuration_is_not_varied_only_what_its_inputs_are_made_from():
    """Written against the version before, which varied every module-level integer: a
    published 3-D max-pool kernel built for the problem's pooling (``kernel_size = 3``,
    ``stride = 2``, ``dilation = 3``, checked in its ``__init__``) was a runtime_error when
    the variation made them 4, 3 and 4. The sizes its inputs are made from still vary,
    through names and functions ``get_inputs`` uses."""
    code = (
        "batch_size = 16\nchannels = 32\nkernel_size = 3\nstride = 2\ndilation = 3\nout_channels = 64\n"
        "dim1 = 64\nshape = (batch_size, channels, dim1)\n"
        "def _make():\n    return torch.randn(*shape)\n"
        "def get_inputs():\n    return [_make()]\n"
        "def get_init_inputs():\n    return [channels, out_channels, kernel_size, stride, dilation]\n"
    )
    assert input_size_constants(code) == {"batch_size": 16, "channels": 32, "dim1": 64}
    assert size_variations(code)[0] == {"batch_size": 17, "channels": 34, "dim1": 68}
    # Inputs from literals only: every size constant, as before.
    literal = "n = 300\nk = 3\ndef get_inputs():\n    return [torch.randn(8, 8)]\ndef get_init_inputs():\n    return [n, k]\n"
    assert input_size_constants(literal) == size_constants(literal) == {"n": 300, "k": 3}


@pytest.mark.triton
def test_a_result_says_when_no_size_variation_was_made():
    """A problem whose ``get_inputs`` writes its sizes inline gives nothing to vary, so a
    kernel hard-coding them passes; before, nothing said so. Its results now carry
    ``no_size_variation`` (information); a problem with size constants does not."""
    from kz_core.evaluate import Evaluator
    from kz_core.model import Candidate, Problem, Severity, Verdict

    from .conftest import REPO, eval_config

    code = (REPO / "examples" / "problems" / "1_vector_add.py").read_text()
    inline = code.replace("torch.randn(n), torch.randn(n)", "torch.randn(5000), torch.randn(5000)")
    assert inline != code
    kernel = (REPO / "examples" / "candidates" / "triton" / "1_vector_add.py").read_text()
    problems = [Problem("1_vector_add", code), Problem("1_vector_add_inline", inline)]
    with Evaluator(problems, eval_config("eval.cpu_timing_trials=1")) as evaluator:
        results = {r.problem: r for r in evaluator.evaluate([Candidate(problem=p.name, backend="triton", code=kernel) for p in problems])}
    for name, says in (("1_vector_add", False), ("1_vector_add_inline", True)):
        result = results[name]
        assert result.verdict is Verdict.CORRECT, result.findings
        notes = [f for f in result.findings if f.check == "no_size_variation"]
        assert bool(notes) is says, result.findings
        assert all(f.severity is Severity.INFO for f in notes)


STATEFUL_PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.state = torch.arange(batch_size * hidden, dtype=torch.float32).reshape(batch_size, hidden) / 1000

    def forward(self, x):
        return x + self.state


batch_size = 64
hidden = 128


def get_inputs():
    return [torch.randn(batch_size, hidden)]


def get_init_inputs():
    return [hidden]
'''

STATEFUL_CANDIDATE = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


batch_size = 64
hidden = 128


class ModelNew(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.state = torch.arange(ROWS * hidden, dtype=torch.float32).reshape(ROWS, hidden) / 1000

    def forward(self, x):
        state = self.state.to(x.device)
        out = torch.empty_like(x)
        n = x.numel()
        add_kernel[(triton.cdiv(n, 1024),)](x, state, out, n, BLOCK=1024)
        return out
'''


@pytest.mark.triton
def test_the_candidate_s_own_size_constants_are_rebound_with_the_problem_s():
    """A module that reads a size constant when it is built (KernelBench level 3's
    ``33_VanillaRNN`` keeps a ``(batch_size, hidden_size)`` state) is built at the other
    sizes by the reference; the candidate repeating the problem's constants read its own,
    unrebound, and its honest copy failed the size variation (a sweep on an H100 found
    it: "The size of tensor a (256) must match the size of tensor b (272)"). Now the
    candidate's copies of the constants are rebound too; a size written as a number stays
    what it was, and still fails."""
    from kz_core.evaluate import Evaluator
    from kz_core.model import Candidate, Problem, Verdict

    from .conftest import eval_config

    problem = Problem("stateful_add", STATEFUL_PROBLEM)
    honest = Candidate("stateful_add", "triton", STATEFUL_CANDIDATE.replace("ROWS", "batch_size"), sample_id="constant")
    literal = Candidate("stateful_add", "triton", STATEFUL_CANDIDATE.replace("ROWS", "64"), sample_id="literal")
    with Evaluator([problem], eval_config("eval.cpu_timing_trials=1")) as evaluator:
        rebound, hard_coded = evaluator.evaluate([honest, literal])
    assert rebound.verdict is Verdict.CORRECT, rebound.message
    assert not any(f.check == "no_size_variation" for f in rebound.findings)
    assert hard_coded.verdict is not Verdict.CORRECT, hard_coded.message
