"""Where kz keeps files that outlive a run: the user's cache folder.

``$KZ_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/kz``, else ``~/.cache/kz``. Nothing here
creates or deletes anything except the folder itself on request.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Overrides the cache folder.
CACHE_DIR_ENV = "KZ_CACHE_DIR"


def cache_dir(create: bool = False) -> Path:
    """The kz cache folder (created when ``create``)."""
    explicit = os.environ.get(CACHE_DIR_ENV, "").strip()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    if explicit:
        path = Path(explicit).expanduser()
    elif xdg:
        path = Path(xdg).expanduser() / "kz"
    else:
        path = Path.home() / ".cache" / "kz"
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path
