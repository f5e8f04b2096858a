"""The wheels carry every package of their distribution: a subpackage missing from a
``pyproject.toml`` list installs fine from the clone (editable) and breaks every user of the
built wheel (``kz_core.rewards`` was left out once, and `kz train` failed on import)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DISTRIBUTIONS = [REPO, *sorted(p.parent for p in (REPO / "plugins").glob("*/pyproject.toml"))]


def declared(project: Path) -> tuple[set[str], dict[str, str]]:
    setuptools = tomllib.loads((project / "pyproject.toml").read_text()).get("tool", {}).get("setuptools", {})
    packages = setuptools.get("packages", [])
    return (set(packages) if isinstance(packages, list) else set()), setuptools.get("package-dir", {})


@pytest.mark.parametrize("project", DISTRIBUTIONS, ids=lambda p: p.name)
def test_every_package_folder_is_in_the_wheel(project):
    packages, package_dir = declared(project)
    if not packages:
        pytest.skip("packages are found automatically")
    found = set()
    for package in packages:
        folder = project / package_dir.get(package, package.replace(".", "/"))
        for init in folder.rglob("__init__.py"):
            relative = init.parent.relative_to(folder)
            if "tests" in relative.parts or "__pycache__" in relative.parts:
                continue
            found.add(".".join([package, *relative.parts]))
    missing = sorted(found - packages)
    assert not missing, f"{project.name}/pyproject.toml leaves out {missing}"
