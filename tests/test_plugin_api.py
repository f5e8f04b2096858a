"""The public API for plugins: what ``kz_core`` exports, documented, and the only core
names the repository's plugins import."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import kz_core

REPO = Path(__file__).resolve().parents[1]
PLUGIN_FILES = sorted(REPO.glob("plugins/*/kz_*/**/*.py"))


def core_imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every import of kz_core in a file, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "kz_core":
            found.append((node.lineno, node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names if alias.name.split(".")[0] == "kz_core"]
    return found


def test_plugins_import_only_the_public_api():
    assert len(PLUGIN_FILES) > 20
    wrong = []
    for path in PLUGIN_FILES:
        for line, module, names in core_imports(path):
            where = f"{path.relative_to(REPO)}:{line}"
            if module != "kz_core" or not names:
                wrong.append(f"{where}: imports {module} (use `from kz_core import ...`)")
            wrong += [f"{where}: kz_core.{name} is not public" for name in names if name not in kz_core.__all__]
    assert not wrong, "\n".join(wrong)


def test_every_public_name_resolves_and_is_documented():
    docs = (REPO / "docs" / "plugin_api.md").read_text(encoding="utf-8")
    for name in kz_core.__all__:
        assert getattr(kz_core, name) is not None
        assert f"`{name}`" in docs, f"{name} is public but docs/plugin_api.md does not list it"


def test_importing_the_api_is_cheap():
    """Names load on first use: ``import kz_core`` does not import torch."""
    probe = "import sys, kz_core; from kz_core import hookimpl, Candidate; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_kz_starts_without_torch():
    """Every ``kz`` command loads the plugins (the default ones include the evaluator's
    guards) and a config: neither imports torch, so that ``kz config show`` or ``kz
    problems list`` take no torch import (seconds); the commands that evaluate import it."""
    probe = (
        "import sys; from kz_core.plugins import load_plugins; from kz_core.config import load_config; "
        "load_plugins(); load_config(None, ['eval.tolerance=kernelbench']); print('torch' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip() == "False"
