"""The torch API catalog the Proposer builds problems from (shipped as ``apis.yaml``).

The core's own ``register_apis`` plugin: it registers every entry of ``apis.yaml``;
plugins add their own APIs the same way. ``api_catalog()`` returns the merged catalog.
Data only: nothing here runs torch.
"""

from __future__ import annotations

import importlib.resources

from omegaconf import OmegaConf

from kz_core.hookspecs import hookimpl
from kz_core.model import ApiSpec


def shipped_apis() -> list[ApiSpec]:
    """The entries of ``kz_core/proposer/apis.yaml``, in file order."""
    text = importlib.resources.files("kz_core.proposer").joinpath("apis.yaml").read_text(encoding="utf-8")
    entries = OmegaConf.to_container(OmegaConf.create(text))
    return [
        ApiSpec(
            name=entry["name"],
            category=entry["category"],
            description=entry.get("description", ""),
            shapes=entry.get("shapes", ""),
            ops=tuple(entry.get("ops", ())),
        )
        for entry in entries  # type: ignore[union-attr]
    ]


def api_catalog() -> dict[str, ApiSpec]:
    """Every registered API by name (the shipped catalog and plugins' additions)."""
    from kz_core.plugins import apis

    return apis()


@hookimpl
def register_apis(register):
    for spec in shipped_apis():
        register(spec)
