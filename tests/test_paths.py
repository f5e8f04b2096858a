"""kz_core.paths: the scratch folders of killed evaluators are swept, live ones are kept."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from kz_core.paths import scratch_root


def test_a_killed_processs_scratch_folder_is_removed_and_a_live_ones_kept(tmp_path):
    """Removed: an hour-old folder of a process that is gone. Kept: a live process's, this
    process's, a recent one (its process may live in another PID namespace), other names."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    gone = tmp_path / f"kz-eval-{int(dead.stdout)}-0123abcd"  # its process has exited
    (gone / "candidate-1").mkdir(parents=True)
    (gone / "zygote-1.log").write_text("")
    recent = tmp_path / f"kz-eval-{int(dead.stdout)}-4567cdef"  # gone too, but changed a minute ago
    recent.mkdir()
    hour_ago = time.time() - 3700
    os.utime(gone, (hour_ago, hour_ago))
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        alive = tmp_path / f"kz-validate-{live.pid}-89abcdef"
        alive.mkdir()
        mine = tmp_path / f"kz-audit-{os.getpid()}-00000000"
        mine.mkdir()
        other = tmp_path / "kz-eval-notes"  # not kz's naming: never touched
        other.mkdir()
        for folder in (alive, mine, other):  # as old as the swept one: kept for another reason
            os.utime(folder, (hour_ago, hour_ago))
        path = scratch_root("eval", tmp_path)
        assert path.parent == tmp_path and path.name.startswith(f"kz-eval-{os.getpid()}-") and not path.exists()
        assert not gone.exists()
        assert alive.is_dir() and mine.is_dir() and other.is_dir() and recent.is_dir()
    finally:
        live.kill()
        live.wait()
