"""Float conversions under Triton's CPU interpreter (kz_backend_triton/interpreted_conversions.py).

Written against the interpreter as Triton 3.9 ships it, with kz's bfloat16 patch: each
conversion below gave another value than a GPU's (over-rejection probe 23, where honest
float8 and bfloat16 quantisers were judged ``incorrect`` on a CPU). The expected values
are torch's conversions, which round as the GPU's ``cvt`` instructions do.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import textwrap  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from kz_backend_triton import interpreted_libdevice  # noqa: E402
from kz_backend_triton.trusted import extract_kernels  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="Triton was imported without its interpreter in this process")

SOURCE = textwrap.dedent(
    """
    import triton
    import triton.language as tl


    @triton.jit
    def convert_kernel(x_ptr, x8_ptr, fp8_ptr, bf16_rtz_ptr, fp16_rtz_ptr, from8_ptr, to8_ptr, int_ptr, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offsets)
        tl.store(fp8_ptr + offsets, x.to(tl.float8e4nv).to(tl.float32))
        tl.store(bf16_rtz_ptr + offsets, x.to(tl.bfloat16, fp_downcast_rounding="rtz"))
        tl.store(fp16_rtz_ptr + offsets, x.to(tl.float16, fp_downcast_rounding="rtz"))
        tl.store(from8_ptr + offsets, tl.load(x8_ptr + offsets).to(tl.bfloat16))
        tl.store(to8_ptr + offsets, tl.load(x8_ptr + offsets).to(tl.bfloat16).to(tl.float8e4nv).to(tl.float32))
        tl.store(int_ptr + offsets, x.to(tl.int32))
    """
)


def test_float_conversions_round_and_saturate_as_a_gpu_does(tmp_path):
    """float32 to float8e4nv: to nearest even with the carry kept (1.96 gave 1.0, 100 gave
    104), saturating; to bfloat16 and float16 with ``rtz``: toward zero, an overflow the
    largest finite value (float16 gave NaN); float8 to and from bfloat16 by value (0.5
    gave 48.0 and 0.0); to int32: truncated, saturating, NaN 0 (all INT_MIN before)."""
    interpreted_libdevice.install()
    kernels = extract_kernels(SOURCE, str(tmp_path / "candidate.py"))
    x = torch.tensor([100.0, 0.0078, 1.96, 1 / 3, 70000.0, -70000.0, 3e9, float("nan")])
    small = torch.tensor([0.5, -1.25, 2.0, 8.0, 0.375, -3.5, 448.0, 0.0])
    outs = [torch.empty(8), torch.empty(8, dtype=torch.bfloat16), torch.empty(8, dtype=torch.float16), torch.empty(8, dtype=torch.bfloat16),
            torch.empty(8), torch.empty(8, dtype=torch.int32)]
    kernels["convert_kernel"][(1,)](x, small.to(torch.float8_e4m3fn), *outs, BLOCK=8)
    fp8, bf16_rtz, fp16_rtz, from8, to8, integers = outs
    finite = x.isfinite()
    top = torch.finfo(torch.float8_e4m3fn).max
    assert torch.equal(fp8[finite], x[finite].clamp(-top, top).to(torch.float8_e4m3fn).float())
    assert bf16_rtz[3].item() == 0.33203125 and bf16_rtz[3].abs() <= abs(1 / 3)
    assert fp16_rtz[4].item() == 65504.0 and fp16_rtz[5].item() == -65504.0
    assert torch.equal(from8, small.bfloat16())
    assert torch.equal(to8, small)  # float8 to bfloat16 and back: each of them is a float8 value
    assert integers.tolist() == [100, 0, 1, 0, 70000, -70000, 2**31 - 1, 0]
