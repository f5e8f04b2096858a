"""Parsing replies: the last fenced Python block, or a reason for format_error."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kz_core.parsing import extract_code

CODE = "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


def test_the_last_python_block_wins():
    reply = f"First try:\n```python\nx = 1\n```\nBetter:\n```python\n{CODE}```\nDone."
    assert extract_code(reply).code == CODE


def test_unlabelled_and_py_fences_count_other_languages_do_not():
    assert extract_code(f"```\n{CODE}```").code == CODE
    assert extract_code(f"```py\n{CODE}```").code == CODE
    parsed = extract_code("```cuda\n__global__ void k() {}\n```")
    assert parsed.code is None and "no python code block" in parsed.reason and "cuda" in parsed.reason
    mixed = f"```cuda\n__global__ void k() {{}}\n```\n```python\n{CODE}```"
    assert extract_code(mixed).code == CODE


def test_a_reply_without_fences_counts_when_it_is_python():
    assert extract_code(CODE).code == CODE
    assert extract_code("I cannot do that.").code is None
    assert "not Python" in extract_code("I cannot do that.").reason


def test_broken_and_empty_blocks_are_format_errors_with_the_reason():
    parsed = extract_code("```python\ndef broken(:\n```")
    assert parsed.code is None and "does not parse (line 1" in parsed.reason
    assert "empty" in extract_code("```python\n\n```").reason


def test_a_reply_cut_off_inside_its_block():
    assert extract_code(f"Here:\n```python\n{CODE}").code == CODE
    parsed = extract_code("Here:\n```python\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return (")
    assert parsed.code is None and "never closed" in parsed.reason


@given(st.text(max_size=300))
def test_never_raises_and_always_explains(text):
    parsed = extract_code(text)
    assert (parsed.code is None) == bool(parsed.reason)
