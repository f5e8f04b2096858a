"""Where kz keeps files that outlive a run: the user's cache folder.

``$KZ_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/kz``, else ``~/.cache/kz``. Nothing here
creates or deletes anything except the folder itself on request. Also
:func:`replace_file`, how kz writes a file that must never be seen half-written.
"""

from __future__ import annotations

import os
import tempfile
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


def replace_file(path: Path | str, data: str | bytes) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file in the same folder, flushed
    to disk, then renamed over ``path``. A crash leaves the old file or the new one, never
    half of one; concurrent writers each replace it whole."""
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False) as handle:
        handle.write(raw)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(handle.name, path)
