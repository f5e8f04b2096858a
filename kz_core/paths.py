"""Where kz keeps files that outlive a run: the user's cache folder.

``$KZ_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/kz``, else ``~/.cache/kz``. Nothing here
creates or deletes anything except the folder itself on request. Also
:func:`replace_file`, how kz writes a file that must never be seen half-written, and
:func:`scratch_root`, the temporary folder of one evaluator, validator or audit.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
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


#: The temporary folders kz's evaluators, validators and audits make: ``kz-<kind>-<pid>-<hex>``.
_SCRATCH_NAME = re.compile(r"^kz-(eval|validate|audit)-(\d+)-[0-9a-f]{8}$")


def scratch_root(kind: str, base: str | Path | None = None) -> Path:
    """A new temporary folder's path for one evaluator, validator or audit of this process
    (``kind``: eval, validate or audit), under ``base`` (default: the system's).

    Such a folder is removed when its owner closes; one whose process was killed (a lost Ray
    node, a time limit) stays. Those are removed here: folders of this naming that belong to
    this user, whose process no longer exists and that have not changed for an hour (a
    process in another PID namespace sharing this folder keeps its own changing). A folder
    of a live process, or of another user's, is never touched.
    """
    import time

    stale_before = time.time() - 3600
    base = Path(base or tempfile.gettempdir())
    try:
        entries = list(os.scandir(base))
    except OSError:
        entries = []
    for entry in entries:
        match = _SCRATCH_NAME.match(entry.name)
        if not match or int(match.group(2)) == os.getpid():
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if not entry.is_dir(follow_symlinks=False) or info.st_uid != os.getuid() or info.st_mtime > stale_before:
                continue
            os.kill(int(match.group(2)), 0)
        except ProcessLookupError:  # its process is gone
            shutil.rmtree(entry.path, ignore_errors=True)
        except OSError:  # alive (another user's: PermissionError) or unreadable
            continue
    return base / f"kz-{kind}-{os.getpid()}-{secrets.token_hex(4)}"
