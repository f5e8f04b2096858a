"""The kz-backend-triton plugin's hook implementations: registration and static checks.

Compilation and runs inside the evaluator's workers arrive with the evaluator; this
module must stay importable without Triton installed (it only reads source text).
"""

from __future__ import annotations

from kz_core import hookimpl
from kz_core.model import BackendInfo

from kz_backend_triton.checks import check_triton_source

BACKEND = "triton"


@hookimpl
def register_backends(register):
    register(
        BackendInfo(
            name=BACKEND,
            language="triton",
            description="@triton.jit kernels launched from ModelNew.forward; the interpreter runs them on a CPU",
            runs_on_cpu=True,
        )
    )


@hookimpl
def static_checks(candidate):
    if candidate.backend != BACKEND:
        return []
    return check_triton_source(candidate.code)
