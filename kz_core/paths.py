"""Where kz keeps files that outlive a run: the user's cache folder.

``$KZ_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/kz``, else ``~/.cache/kz``. Nothing here
creates or deletes anything except the folder itself on request. Also
:func:`replace_file`, how kz writes a file that must never be seen half-written,
:func:`scratch_root`, the temporary folder of one evaluator, validator or audit, and
:func:`remove_tree`, how a folder that untrusted code wrote into is removed.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
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
            remove_tree(entry.path)
        except OSError:  # alive (another user's: PermissionError) or unreadable
            continue
    return base / f"kz-{kind}-{os.getpid()}-{secrets.token_hex(4)}"


#: How :func:`remove_tree` opens a folder: never through a symbolic link.
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(path: str | Path) -> bool:
    """Remove ``path`` and everything under it, as far as this process may; never raises
    (a failure is logged as a warning) and returns whether nothing is left.

    The folders it is used on (scratch folders) were written by untrusted code, which
    ``shutil.rmtree`` does not survive: a tree 1500 folders deep made it raise
    ``RecursionError`` (not an ``OSError``, so ``ignore_errors`` did not hold it), which
    ended a whole batch and left the tree, a setuid copy of a shell at its bottom, under
    /tmp (red-team round 26b). Here nothing recurses on the stack and at most two folders
    are open at once, however deep the tree: each folder is emptied as a child of the top
    one, its own subfolders first moved up beside it under fresh names, so no folder is
    ever reached through more than one level. Symbolic links are removed, never followed
    (every folder is opened relative to its parent with ``O_NOFOLLOW``), and a folder
    that may not be listed, entered or changed (``chmod 000``) is given ``0o700`` first.
    """
    try:
        parent, name = os.path.split(os.path.abspath(os.fspath(path)))
        parent_fd = os.open(parent, _FOLDER_FLAGS & ~os.O_NOFOLLOW)
    except FileNotFoundError:
        return True
    except Exception as exc:  # noqa: BLE001 - never raises; said below
        _removal_failed(path, exc)
        return False
    try:
        failures: list[BaseException] = []
        _remove_entry(parent_fd, name, failures)
        try:
            os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
            failures.append(OSError(f"{path} is still there"))
        except FileNotFoundError:
            pass
    except Exception as exc:  # noqa: BLE001 - never raises
        failures.append(exc)
    finally:
        os.close(parent_fd)
    if failures:
        _removal_failed(path, failures[0], len(failures))
    return not failures


def _removal_failed(path: str | Path, exc: BaseException, count: int = 1) -> None:
    from loguru import logger

    logger.warning("could not remove all of {} ({} failure(s); the first: {}: {})", path, count, type(exc).__name__, exc)


def _remove_entry(parent_fd: int, name: str, failures: list[BaseException]) -> None:
    """Remove ``name`` in the folder ``parent_fd``: a file or link, or a folder with all of
    it (:func:`_empty`). What fails is appended to ``failures``; the rest goes on."""
    try:
        info = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(name, dir_fd=parent_fd)
        return
    _make_usable(parent_fd, name, info)
    fd = os.open(name, _FOLDER_FLAGS, dir_fd=parent_fd)
    try:
        _empty(fd, failures)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent_fd)


def _empty(top_fd: int, failures: list[BaseException]) -> None:
    """Remove everything in the folder ``top_fd``. Its subfolders are emptied one at a time
    (a list of names, not the stack); a subfolder's own subfolders are first renamed into
    ``top_fd`` and emptied later in turn, so the depth of the tree never matters."""
    prefix = f".kz-removing-{secrets.token_hex(6)}-"
    moved = 0
    pending: list[str | None] = [None]  # None: the top folder itself
    while pending:
        name = pending.pop()
        try:
            if name is None:
                fd = top_fd
            else:
                info = os.stat(name, dir_fd=top_fd, follow_symlinks=False)
                if not stat.S_ISDIR(info.st_mode):  # only folders are queued; never follow
                    os.unlink(name, dir_fd=top_fd)
                    continue
                _make_usable(top_fd, name, info)
                fd = os.open(name, _FOLDER_FLAGS, dir_fd=top_fd)
        except FileNotFoundError:
            continue
        except OSError as exc:
            failures.append(exc)
            continue
        try:
            while True:  # listed again until a listing finds nothing it can remove
                removed = 0
                with os.scandir(fd) as entries:
                    for entry in entries:
                        try:
                            if not entry.is_dir(follow_symlinks=False):
                                os.unlink(entry.name, dir_fd=fd)
                            elif name is None:
                                pending.append(entry.name)
                            else:
                                _make_usable(fd, entry.name, entry.stat(follow_symlinks=False))
                                moved += 1
                                os.rename(entry.name, f"{prefix}{moved}", src_dir_fd=fd, dst_dir_fd=top_fd)
                                pending.append(f"{prefix}{moved}")
                            removed += 1
                        except FileNotFoundError:
                            pass
                        except OSError as exc:
                            failures.append(exc)
                if not removed or name is None:  # the top folder's subfolders are queued, not gone
                    break
        except OSError as exc:
            failures.append(exc)
        finally:
            if name is not None:
                os.close(fd)
        if name is not None:
            try:
                os.rmdir(name, dir_fd=top_fd)
            except FileNotFoundError:
                pass
            except OSError as exc:
                failures.append(exc)


def _make_usable(parent_fd: int, name: str, info: os.stat_result) -> None:
    """Give the folder ``name`` (``info``: its ``lstat``) the owner's read, write and search
    permission when it lacks any (untrusted code may ``chmod 000`` its folders; root needs
    none of it, any other user all of it). The link itself is never followed."""
    if info.st_mode & 0o700 == 0o700:
        return
    mode = stat.S_IMODE(info.st_mode) | 0o700
    try:
        os.chmod(name, mode, dir_fd=parent_fd, follow_symlinks=False)
    except (NotImplementedError, OSError):
        # A C library without fchmodat(AT_SYMLINK_NOFOLLOW): through a descriptor of the
        # folder itself (O_PATH: no permission on it is needed to open it so).
        fd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent_fd)
        try:
            os.chmod(f"/proc/self/fd/{fd}", mode)
        finally:
            os.close(fd)
