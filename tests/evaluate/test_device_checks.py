"""The Triton kernels that check large GPU tensors (``kz_core/evaluate/device_checks.py``)
compute what the torch operations they replace compute: the same fingerprint sums and the
same counts and largest errors of a comparison, in every floating dtype, with NaN,
infinities, values outside the tolerance and a length that is no multiple of a block.
Here under Triton's interpreter, on the CPU; on a GPU in ``tests/evaluate/test_gpu.py``."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

# Not imported here: other tests of this process set TRITON_INTERPRET before Triton's first
# import (plugins/backend_triton/tests/test_trusted.py), and an import now would come first.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs Triton")

SCRIPT = textwrap.dedent(
    """
    import torch
    from kz_core.evaluate import device_checks
    from kz_core.evaluate.correctness import _chunk_errors
    from kz_core.evaluate.execution import device_sums, secret_key
    from kz_core.model import Tolerance

    device = DEVICE
    generator = torch.Generator().manual_seed(7)

    def torch_sums(words, key):  # the torch operations' sums (a CPU tensor's: no kernel)
        plain, weighted, _ = device_sums(words.cpu().view(torch.uint8), key).split(":")
        return int(plain), int(weighted)

    # Words of every sign, large enough that the sums wrap; the public key and a secret one.
    for key in (0, secret_key()):
        for n in (1, 4095, 4096, 3 * 4096 + 17):
            words = torch.randint(-(2**31), 2**31 - 1, (n,), generator=generator, dtype=torch.int64).to(torch.int32).to(device)
            assert device_checks.word_sums(words, key) == torch_sums(words, key), (n, key)

    chunk = 2 * device_checks.BLOCK  # two chunks and a part of a third
    for dtype in device_checks.COMPARED_DTYPES:
        n = 2 * chunk + 1234
        want = (torch.randn(n, generator=generator) * 3).to(dtype)
        got = want.clone()
        got[::97] = (got[::97].to(torch.float64) * (1 + 1e-2)).to(dtype)  # outside the tolerance
        got[5::211] = (got[5::211].to(torch.float64) + 1e-7).to(dtype)  # inside it
        want[10], got[10] = float("nan"), float("nan")  # agree
        want[11], got[11] = float("nan"), 1.0  # differ
        want[12], got[12] = float("inf"), float("inf")  # agree
        want[13], got[13] = float("inf"), -float("inf")  # differ
        want[14], got[14] = 2.0, float("inf")
        want[chunk + 3], got[chunk + 3] = 0.0, 1e-3
        want[n - 1], got[n - 1] = 1.0, float("nan")
        want, got = want.to(device), got.to(device)
        atol, rtol = 1e-4, 1e-3
        special, outside, max_abs, max_rel = device_checks.errors(want, got, atol, rtol, chunk)
        expected_special, expected_outside, largest = [], [], torch.zeros(2, dtype=torch.float64, device=device)
        for start in range(0, n, chunk):
            s, o, d, r = _chunk_errors(want[start : start + chunk], got[start : start + chunk], torch.float64, Tolerance(atol, rtol))
            expected_special.append(int(s.sum()))
            expected_outside.append(int(o.sum()))
            largest = torch.maximum(largest, torch.stack([d.max(), r.max()]))
        assert special == expected_special, (dtype, special, expected_special)
        assert outside == expected_outside, (dtype, outside, expected_outside)
        assert sum(outside) > 20 and sum(special) == 4, (dtype, outside, special)
        assert [max_abs, max_rel] == largest.tolist(), (dtype, max_abs, max_rel, largest.tolist())
    # Exactly on the bound is inside it, as in torch: |1.5 - 1| == 0.25 + 0.25 * |1|.
    for dtype in device_checks.COMPARED_DTYPES:
        want = torch.ones(5000, dtype=dtype, device=device)
        special, outside, max_abs, max_rel = device_checks.errors(want, want * 1.5, 0.25, 0.25, chunk)
        assert sum(outside) == 0 and sum(special) == 0 and max_abs == max_rel == 0.5, (dtype, outside, max_abs, max_rel)
    print("same")
    """
)


def test_the_check_kernels_compute_what_the_torch_operations_do():
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-c", SCRIPT.replace("DEVICE", "'cpu'")], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("same"), done.stdout[-2000:] + done.stderr[-4000:]


@pytest.mark.gpu
def test_the_check_kernels_compute_what_the_torch_operations_do_on_a_gpu():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", SCRIPT.replace("DEVICE", "'cuda'")], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("same"), done.stdout[-2000:] + done.stderr[-4000:]


def test_a_write_balanced_against_public_weights_changes_the_keyed_sums():
    """Written against red-team round 21's version: a GPU fingerprint was two sums with
    public position weights, so a kernel writing into a module constant could add d, -d,
    -d, d at four positions whose weights balance (w(a) + w(e) = w(b) + w(c)) and keep both
    sums: the constant stayed pristine and torch over it counted as a fold. A process's
    constants are now summed under its secret key, whose weights the kernel cannot know."""
    import numpy as np
    import torch

    from kz_core.evaluate.execution import device_sums, position_weights, secret_key

    weights = position_weights(torch.arange(1500, dtype=torch.int64), 0).numpy()
    rows, cols = np.triu_indices(len(weights), 1)
    sums = weights[rows] + weights[cols]
    order = np.argsort(sums, kind="stable")
    same = np.flatnonzero(sums[order][1:] == sums[order][:-1])
    pairs = next(
        (int(order[i]), int(order[i + 1]))
        for i in same
        if len({rows[order[i]], cols[order[i]], rows[order[i + 1]], cols[order[i + 1]]}) == 4
    )
    (a, e), (b, c) = [(int(rows[k]), int(cols[k])) for k in pairs]
    words = torch.randint(-(2**20), 2**20, (1500,), generator=torch.Generator().manual_seed(3), dtype=torch.int32)
    forged = words.clone()
    forged[[a, e]] += 12345
    forged[[b, c]] -= 12345

    def sums_of(tensor, key):
        return device_sums(tensor.view(torch.uint8), key)

    assert sums_of(forged, 0) == sums_of(words, 0)  # balanced: the public weights cannot tell
    key = secret_key()
    assert key and sums_of(forged, key) != sums_of(words, key)
