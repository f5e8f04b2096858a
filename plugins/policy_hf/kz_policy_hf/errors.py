"""The one exception kz-policy-hf raises: :class:`PolicyError`.

Every failure a user can fix (a missing model folder, a model id that is not cached while
offline, an impossible device or option) is raised as a ``PolicyError`` whose message says
what to do. This module holds nothing else and must not import torch or transformers.
"""

from __future__ import annotations

from kz_core import HookUserError


class PolicyError(HookUserError):
    """A policy could not be loaded or sampled; the message says what to change (kz's
    commands print it as a usage error)."""
