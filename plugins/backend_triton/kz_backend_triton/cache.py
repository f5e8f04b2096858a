"""A Triton cache for candidate workers: their own folder to write, the executors' to read.

A candidate worker is fresh for every candidate and must not write any cache another
process reads (it could plant a compiled kernel for another candidate's source). Alone,
its own empty cache would make Triton build its launcher stubs with a C compiler again for
every candidate (seconds on a GPU machine). With this manager (``TRITON_CACHE_MANAGER``),
Triton writes into the worker's scratch folder as usual and also *reads* what executors
compiled before (``KZ_TRITON_READ_CACHE``): the stubs, and any kernel an executor built for
the same source. Executors run no candidate code, so what they cached is trusted; the
worker's Landlock rules let it read that folder and not write it. Runs inside candidate
workers, and in executors once they are sealed. This plugin's registration names it for
those roles (``BackendInfo.environment``, ``plugin.py``); the core names no Triton variable.
"""

from __future__ import annotations

import json
import os
from typing import Optional

from triton.runtime.cache import FileCacheManager

#: The read-only folder (the executors' Triton cache).
READ_CACHE_ENV = "KZ_TRITON_READ_CACHE"


class LayeredCacheManager(FileCacheManager):
    """Triton's file cache, falling back to a read-only folder for what it lacks."""

    def __init__(self, key: str, override: bool = False, dump: bool = False):
        super().__init__(key, override, dump)
        shared = os.environ.get(READ_CACHE_ENV, "")
        self.read_dir = os.path.join(shared, key) if shared and not override and not dump else ""

    def _shared(self, filename: str) -> Optional[str]:
        if not self.read_dir:
            return None
        path = os.path.join(self.read_dir, filename)
        return path if os.path.exists(path) else None

    def get_file(self, filename: str) -> Optional[str]:
        return super().get_file(filename) or self._shared(filename)

    def get_group(self, filename: str) -> Optional[dict[str, str]]:
        group = super().get_group(filename)
        if group is not None:
            return group
        path = self._shared(f"__grp__{filename}")
        if path is None:
            return None
        try:
            with open(path) as handle:
                children = json.load(handle).get("child_paths")
        except (OSError, ValueError, AttributeError):
            return None
        if not isinstance(children, dict) or not all(isinstance(p, str) and os.path.exists(p) for p in children.values()):
            return None
        return dict(children)
