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


def test_the_built_wheels_work_without_the_clone(tmp_path):
    """What `make dist` builds: five wheels that, installed elsewhere, import and find the
    shipped examples, presets and API catalog (the README's install line from a clone)."""
    import os
    import subprocess
    import sys
    import zipfile

    wheels = tmp_path / "dist"
    build = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", str(wheels)]
    subprocess.run([*build, *map(str, DISTRIBUTIONS)], check=True, capture_output=True, cwd=REPO)
    built = sorted(p.name.split("-")[0] for p in wheels.glob("*.whl"))
    assert built == ["kz_backend_cuda", "kz_backend_triton", "kz_core", "kz_policy_hf", "kz_reward_cagrpo"], built
    core = next(wheels.glob("kz_core-*.whl"))
    names = zipfile.ZipFile(core).namelist()
    for needed in ("kz_core/rewards/coder.py", "kz_core/examples/problems/1_vector_add.py", "kz_core/proposer/apis.yaml"):
        assert needed in names, needed
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target", str(site), *map(str, wheels.glob("*.whl"))], check=True, capture_output=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = (
        "import kz_core, kz_core.rewards, kz_backend_triton.plugin, kz_policy_hf, kz_reward_cagrpo\n"
        "from kz_core.problems import load_problems\n"
        "assert kz_core.__file__.startswith(%r), kz_core.__file__\n"
        "print(len(load_problems('examples').problems))\n"
    ) % str(site)
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=elsewhere, env={**os.environ, "PYTHONPATH": str(site)})
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "6"
