"""Prompts for the Coder (a problem in, a kernel module out) and the Proposer (torch APIs
in, a KernelBench-format problem out).

Each Coder prompt states the rules the evaluator enforces and, by default, shows one
worked example in the requested backend: the example problem ``1_vector_add`` with its
candidate from ``examples/candidates/<backend>/``. System prompts are configurable
(``policy.coder_system_prompt``, ``policy.proposer_system_prompt``). Prompts are data; a
policy plugin renders them with its model's chat template.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Sequence
from typing import Any

from kz_core.model import ChatMessage, Problem, Prompt

CODER_SYSTEM = (
    "You are an expert GPU kernel engineer. You rewrite PyTorch modules as custom kernels that "
    "compute exactly the same results, faster. You answer with one complete Python module in a "
    "single ```python code block."
)

PROPOSER_SYSTEM = (
    "You design small PyTorch modules that make good GPU kernel exercises. You answer with one "
    "complete Python module in a single ```python code block."
)

RULES = """Rules (an evaluator checks every one of them):
- Define `class ModelNew(nn.Module)` whose constructor takes the same arguments as `Model` and whose forward takes the same inputs and returns outputs of the same shapes and dtypes.
- Do the computation in your own kernels, launched from forward. Use torch only to allocate outputs and to reshape; torch operations that compute are rejected.
- Handle every input size: do not hard-code the sizes of the example; guard the edges with masks or bounds checks.
- No fallbacks (try/except around kernels), no use of `Model`, no threads or extra CUDA streams, no changes to global torch settings, no random seeding.
- Answer with the complete module in one ```python code block."""


def _example(path: str) -> str | None:
    resource = importlib.resources.files("kz_core.examples").joinpath(path)
    return resource.read_text(encoding="utf-8") if resource.is_file() else None


def _backend_guide(backend: str) -> str:
    """The backend's own guide (``BackendInfo.prompt_guide``), else one made from its description."""
    from kz_core.plugins import backends

    info = backends().get(backend)
    if info is not None and info.prompt_guide:
        return info.prompt_guide
    return f"Write the kernels for the {backend!r} backend" + (f": {info.description}." if info and info.description else ".")


def coder_prompt(problem: Problem, backend: str, config: Any) -> Prompt:
    """The prompt asking the Coder for a ``backend`` kernel module for ``problem``.

    :param config: the ``policy`` config section (system prompt, one-shot example on/off).
    """
    parts = [_backend_guide(backend), RULES]
    example_problem = _example("problems/1_vector_add.py")
    example_solution = _example(f"candidates/{backend}/1_vector_add.py")
    if config.one_shot and example_problem and example_solution and problem.name != "1_vector_add":
        parts.append(f"Example. For this module:\n```python\n{example_problem}```\na good answer is:\n```python\n{example_solution}```")
    parts.append(f"Now write ModelNew for this module:\n```python\n{problem.code.rstrip()}\n```")
    system = config.coder_system_prompt or CODER_SYSTEM
    return Prompt(prompt_id=problem.name, messages=(ChatMessage("system", system), ChatMessage("user", "\n\n".join(parts))))


def proposer_prompt(apis: Sequence[str], config: Any) -> Prompt:
    """The prompt asking the Proposer for a KernelBench-format module built from ``apis``."""
    example = _example("problems/6_linear_gelu.py")
    parts = [
        f"Write a PyTorch module that uses these torch APIs: {', '.join(apis)}.",
        "Format: `class Model(nn.Module)` with `__init__` and `forward`; module-level integer size "
        "constants; `get_inputs()` returning a list of fresh random input tensors built from those "
        "constants; `get_init_inputs()` returning the constructor's arguments. The output must depend "
        "on the inputs, be finite, and be the same on every run for the same inputs.",
    ]
    if config.one_shot and example:
        parts.append(f"Example (built from torch.nn.Linear and torch.nn.functional.gelu):\n```python\n{example}```")
    system = config.proposer_system_prompt or PROPOSER_SYSTEM
    return Prompt(prompt_id="apis:" + "+".join(apis), messages=(ChatMessage("system", system), ChatMessage("user", "\n\n".join(parts))))
