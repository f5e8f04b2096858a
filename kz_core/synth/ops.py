"""The operations synthetic problems are built from: one line of torch, of Triton and of
CUDA C++ each, for every elementwise operation, and the reductions over a row.

Every entry states what its input must be (``domain``: any value, non-negative or
positive) and what its output is (``yields``), so that chains are built only where each
step is defined (a logarithm only of something positive) and stays finite (an exponential
only of something bounded). ``api`` names the entry of the API catalog
(``kz_core/proposer/apis.yaml``) the torch line uses. This module holds data; it runs
nothing.
"""

from __future__ import annotations

import attrs

#: What a value is known to be: ``any`` (unbounded), ``bounded`` (|v| of order 1),
#: ``nonneg`` (>= 0, bounded), ``positive`` (> 0, bounded).
DOMAINS = ("any", "bounded", "nonneg", "positive")


@attrs.frozen
class Unary:
    """One elementwise operation of one value ``{x}`` (and constants ``{a}``, ``{b}``).

    :ivar torch: the torch expression; ``{x}`` is a tensor.
    :ivar triton: the Triton expression on an fp32 block.
    :ivar cuda: the CUDA C++ expression on a ``float``.
    :ivar needs: the domain its input must be in.
    :ivar yields: the domain of its output, given its input meets ``needs``.
    """

    name: str
    api: str
    torch: str
    triton: str
    cuda: str
    needs: str = "any"
    yields: str = "any"


UNARY: tuple[Unary, ...] = (
    Unary("relu", "torch.relu", "torch.relu({x})", "tl.maximum({x}, 0.0)", "fmaxf({x}, 0.0f)", "any", "nonneg"),
    Unary("sigmoid", "torch.sigmoid", "torch.sigmoid({x})", "1.0 / (1.0 + tl.exp(-{x}))", "1.0f / (1.0f + expf(-{x}))", "any", "positive"),
    Unary("tanh", "torch.tanh", "torch.tanh({x})", "2.0 / (1.0 + tl.exp(-2.0 * {x})) - 1.0", "tanhf({x})", "any", "bounded"),
    Unary(
        "gelu",
        "torch.nn.functional.gelu",
        'torch.nn.functional.gelu({x}, approximate="tanh")',
        "0.5 * {x} * (1.0 + (2.0 / (1.0 + tl.exp(-2.0 * (0.7978845608028654 * ({x} + 0.044715 * {x} * {x} * {x})))) - 1.0))",
        "0.5f * {x} * (1.0f + tanhf(0.7978845608028654f * ({x} + 0.044715f * {x} * {x} * {x})))",
        "bounded",
        "bounded",
    ),
    Unary("silu", "torch.nn.functional.silu", "torch.nn.functional.silu({x})", "{x} / (1.0 + tl.exp(-{x}))", "{x} / (1.0f + expf(-{x}))", "bounded", "bounded"),
    Unary(
        "leaky_relu",
        "torch.nn.functional.leaky_relu",
        "torch.nn.functional.leaky_relu({x}, {a})",
        "tl.where({x} > 0.0, {x}, {a} * {x})",
        "({x} > 0.0f ? {x} : {a}f * {x})",
        "any",
        "any",
    ),
    Unary("elu", "torch.nn.functional.elu", "torch.nn.functional.elu({x})", "tl.where({x} > 0.0, {x}, tl.exp({x}) - 1.0)", "({x} > 0.0f ? {x} : expf({x}) - 1.0f)", "bounded", "bounded"),
    Unary(
        "softplus",
        "torch.nn.functional.softplus",
        "torch.nn.functional.softplus({x})",
        "tl.where({x} > 20.0, {x}, tl.log(1.0 + tl.exp({x})))",
        "({x} > 20.0f ? {x} : log1pf(expf({x})))",
        "bounded",
        "positive",
    ),
    Unary(
        "hardtanh",
        "torch.nn.functional.hardtanh",
        "torch.nn.functional.hardtanh({x})",
        "tl.minimum(tl.maximum({x}, -1.0), 1.0)",
        "fminf(fmaxf({x}, -1.0f), 1.0f)",
        "any",
        "bounded",
    ),
    Unary("abs", "torch.abs", "torch.abs({x})", "tl.abs({x})", "fabsf({x})", "any", "nonneg"),
    Unary("exp", "torch.exp", "torch.exp({x})", "tl.exp({x})", "expf({x})", "bounded", "positive"),
    Unary("sqrt", "torch.sqrt", "torch.sqrt({x})", "tl.sqrt({x})", "sqrtf({x})", "nonneg", "nonneg"),
    Unary("log", "torch.log", "torch.log({x})", "tl.log({x})", "logf({x})", "positive", "any"),
    Unary("clamp", "torch.clamp", "torch.clamp({x}, -{a}, {a})", "tl.minimum(tl.maximum({x}, -{a}), {a})", "fminf(fmaxf({x}, -{a}f), {a}f)", "any", "bounded"),
    Unary("affine", "torch.mul", "{x} * {a} + {b}", "{x} * {a} + {b}", "{x} * {a}f + {b}f", "any", "any"),
    Unary("square", "torch.mul", "{x} * {x}", "{x} * {x}", "{x} * {x}", "bounded", "nonneg"),
)


@attrs.frozen
class Binary:
    """One elementwise operation of two values ``{x}`` and ``{y}`` (``api`` empty: the
    catalog has no entry for it, and a Proposer prompt does not name it)."""

    name: str
    api: str
    torch: str
    triton: str
    cuda: str


BINARY: tuple[Binary, ...] = (
    Binary("add", "torch.add", "{x} + {y}", "{x} + {y}", "{x} + {y}"),
    Binary("sub", "", "{x} - {y}", "{x} - {y}", "{x} - {y}"),
    Binary("mul", "torch.mul", "{x} * {y}", "{x} * {y}", "{x} * {y}"),
    Binary("maximum", "", "torch.maximum({x}, {y})", "tl.maximum({x}, {y})", "fmaxf({x}, {y})"),
    Binary("minimum", "", "torch.minimum({x}, {y})", "tl.minimum({x}, {y})", "fminf({x}, {y})"),
    Binary("where_greater", "torch.where", "torch.where({x} > {y}, {x}, {y} * 0.5)", "tl.where({x} > {y}, {x}, {y} * 0.5)", "({x} > {y} ? {x} : {y} * 0.5f)"),
)


def combine(domain_x: str, domain_y: str, op: str) -> str:
    """The domain of a binary operation's output (``any`` unless it is safe to say more)."""
    both = {domain_x, domain_y}
    if op in ("maximum", "minimum", "where_greater") and both <= {"bounded", "nonneg", "positive"}:
        return "bounded"
    if op == "mul" and both <= {"nonneg", "positive"}:
        return "nonneg"
    if op == "add" and both <= {"nonneg", "positive"}:
        return "nonneg"
    if both <= {"bounded", "nonneg", "positive"}:
        return "bounded"
    return "any"


def allowed(op: Unary, domain: str) -> bool:
    """Whether ``op`` is defined and stays finite on a value of ``domain``."""
    order = {"any": 0, "bounded": 1, "nonneg": 2, "positive": 3}
    if op.needs == "any":
        return True
    if op.needs == "bounded":
        return order[domain] >= 1
    if op.needs == "nonneg":
        return domain in ("nonneg", "positive")
    return domain == "positive"


@attrs.frozen
class Reduction:
    """A reduction over the last dimension: its torch call, and how a kernel accumulates
    (``start``: the identity; ``step``: folds a block ``{v}`` into ``{acc}`` in Triton;
    ``cuda_step``: folds ``{v}`` into ``{acc}`` in CUDA; ``finish``: from the row's total
    ``{acc}`` and its length ``{n}`` to the result)."""

    name: str
    api: str
    torch: str
    start: str
    masked: str
    triton_block: str
    triton_fold: str
    cuda_start: str
    cuda_fold: str
    triton_finish: str
    cuda_finish: str


REDUCTIONS: tuple[Reduction, ...] = (
    Reduction("sum", "torch.sum", "torch.sum({x}, dim=-1, keepdim={keep})", "0.0", "0.0", "tl.sum({v}, axis=0)", "{acc} + {r}", "0.0f", "{acc} + {v}", "{acc}", "{acc}"),
    Reduction("mean", "torch.mean", "torch.mean({x}, dim=-1, keepdim={keep})", "0.0", "0.0", "tl.sum({v}, axis=0)", "{acc} + {r}", "0.0f", "{acc} + {v}", "{acc} / {n}", "{acc} / (float){n}"),
    Reduction("amax", "torch.amax", "torch.amax({x}, dim=-1, keepdim={keep})", "float('-inf')", "float('-inf')", "tl.max({v}, axis=0)", "tl.maximum({acc}, {r})", "__int_as_float(0xff800000)", "fmaxf({acc}, {v})", "{acc}", "{acc}"),
    Reduction("amin", "torch.amin", "torch.amin({x}, dim=-1, keepdim={keep})", "float('inf')", "float('inf')", "tl.min({v}, axis=0)", "tl.minimum({acc}, {r})", "__int_as_float(0x7f800000)", "fminf({acc}, {v})", "{acc}", "{acc}"),
)

#: Row-wise normalisations over the last dimension (two passes over a row).
SOFTMAX_LIKE = ("softmax", "log_softmax", "logsumexp")
SOFTMAX_API = {"softmax": "torch.softmax", "log_softmax": "torch.log_softmax", "logsumexp": "torch.logsumexp"}
