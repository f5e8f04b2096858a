"""The plugin manager: the core's default plugins, then the entry-point group ``kz``.

``get_plugin_manager()`` loads plugins once (idempotent) and checks every hookimpl against
its spec (``check_pending``), so a misspelt hook fails at start-up, not silently.
``KZ_LOAD_PLUGINS`` restricts which installed plugins load: a comma-separated list of
distribution or entry-point names; set and empty, none load. The core's defaults always
load. Registries built from the ``register_*`` hooks (backends, problem sources) reject a
name registered twice with an error naming both plugins.

The core never imports a plugin's module by name: it only calls hooks.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from collections.abc import Callable
from typing import Any

import attrs
import pluggy
from loguru import logger

from kz_core import hookspecs
from kz_core.errors import KzError

ENTRY_POINT_GROUP = "kz"
LOAD_PLUGINS_ENV = "KZ_LOAD_PLUGINS"

#: The core's own plugins, registered exactly as a third party's would be.
DEFAULT_PLUGINS: tuple[str, ...] = (
    "kz_core.problems.sources",
    "kz_core.proposer.catalog",
    "kz_core.proposer.reward",
    "kz_core.frontier",
    "kz_core.evaluate.guards",
    "kz_core.commands.plugins_command",
    "kz_core.commands.config_command",
    "kz_core.commands.problems_command",
    "kz_core.commands.eval_command",
    "kz_core.commands.check_command",
    "kz_core.commands.fuzz_command",
    "kz_core.commands.generate_command",
    "kz_core.commands.propose_command",
    "kz_core.commands.report_command",
    "kz_core.commands.train_command",
    "kz_core.commands.data_command",
)


class PluginError(KzError, RuntimeError):
    """A plugin conflict or a broken hook implementation; the message names the plugins."""


@attrs.frozen
class PluginInfo:
    """What ``kz plugins`` shows for one registered plugin."""

    name: str
    version: str
    hooks: tuple[str, ...]
    default: bool = False
    distribution: str = ""


pm = pluggy.PluginManager("kz")
pm.add_hookspecs(hookspecs)

_loaded = False
_default_names: set[str] = set()
_distributions: dict[str, importlib.metadata.Distribution] = {}
_failed: dict[str, str] = {}


def _allowed_plugins() -> set[str] | None:
    raw = os.environ.get(LOAD_PLUGINS_ENV)
    if raw is None:
        return None
    return {name.strip() for name in raw.split(",") if name.strip()}


def load_plugins() -> pluggy.PluginManager:
    """Register the default plugins, then installed ones; safe to call many times."""
    global _loaded
    if _loaded:
        return pm
    _loaded = True
    for module_name in DEFAULT_PLUGINS:
        module = importlib.import_module(module_name)
        if pm.get_plugin(module_name) is None:
            pm.register(module, name=module_name)
        _default_names.add(module_name)
    allowed = _allowed_plugins()
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist_name = entry_point.dist.name if entry_point.dist else ""
        if allowed is not None and entry_point.name not in allowed and dist_name not in allowed:
            continue
        if pm.get_plugin(entry_point.name) is not None:
            continue
        try:
            plugin = entry_point.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not break kz
            _failed[entry_point.name] = f"{type(exc).__name__}: {exc}"
            logger.warning(
                "plugin {!r} ({}) failed to import and was skipped: {}: {}. Fix or uninstall it, "
                "or leave it out with {}=...",
                entry_point.name, dist_name or "?", type(exc).__name__, exc, LOAD_PLUGINS_ENV,
            )
            continue
        pm.register(plugin, name=entry_point.name)
        if entry_point.dist is not None:
            _distributions[entry_point.name] = entry_point.dist
    check_pending()
    return pm


def check_pending() -> None:
    """Fail loudly on a hookimpl that matches no spec (a misspelt hook name)."""
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"plugin {exc.plugin!r} implements a hook kz does not define: {exc}") from exc


def get_plugin_manager() -> pluggy.PluginManager:
    return load_plugins()


def failed_plugins() -> dict[str, str]:
    """Entry points that failed to import, with the error, for ``kz plugins``."""
    load_plugins()
    return dict(_failed)


def _core_version() -> str:
    try:
        return importlib.metadata.version("kz-core")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def get_plugins() -> list[PluginInfo]:
    """Every registered plugin with its version and the hooks it implements."""
    load_plugins()
    infos = []
    for name, plugin in pm.list_name_plugin():
        if plugin is None:  # blocked
            continue
        hooks = tuple(sorted(impl.name for impl in _hookcallers_of(plugin)))
        dist = _distributions.get(name)
        if dist is not None:
            version = dist.version
        elif name in _default_names:
            version = _core_version()
        else:
            version = str(getattr(plugin, "__version__", ""))
        infos.append(
            PluginInfo(
                name=name,
                version=version,
                hooks=hooks,
                default=name in _default_names,
                distribution=dist.name if dist is not None else ("kz-core" if name in _default_names else ""),
            )
        )
    return infos


def _hookcallers_of(plugin: Any) -> list[Any]:
    return pm.get_hookcallers(plugin) or []


def registered(hook_name: str) -> list[tuple[Any, str]]:
    """Call a ``register_*`` hook plugin by plugin, in load order: every item registered,
    with the registering plugin's name."""
    load_plugins()
    hook = getattr(pm.hook, hook_name)
    found: list[tuple[Any, str]] = []
    # get_hookimpls() lists plugins in load order (pluggy *calls* them in reverse).
    for impl in hook.get_hookimpls():
        plugin_name = pm.get_name(impl.plugin) or str(impl.plugin)

        def register(item: Any, _plugin: str = plugin_name) -> None:
            found.append((item, _plugin))

        impl.function(**{arg: register for arg in impl.argnames})
    return found


def registrations(hook_name: str, key: Callable[[Any], str], what: str) -> dict[str, tuple[Any, str]]:
    """:func:`registered`, by name.

    :returns: ``{name: (registered item, plugin name)}``.
    :raises PluginError: when two plugins register the same name.
    """
    registry: dict[str, tuple[Any, str]] = {}
    for item, plugin in registered(hook_name):
        name = key(item)
        if name in registry:
            raise PluginError(
                f"{what} {name!r} is registered twice: by plugin {registry[name][1]!r} and by "
                f"plugin {plugin!r}. Uninstall one of them, or leave one out with {LOAD_PLUGINS_ENV}."
            )
        registry[name] = (item, plugin)
    return registry


_backend_callers: dict[tuple[str, str, frozenset[int]], Any] = {}


def backend_hook(hook_name: str, backend: str) -> Any:
    """The hook ``hook_name`` (``backend_compile``, ``backend_run``, ``backend_kernels``)
    called on the plugin that registered ``backend`` only, so that no other plugin can take
    that backend's candidates (pluggy's ``subset_hook_caller``). A backend that no plugin
    registered gets a caller with no implementation (None for these first-result hooks).
    """
    load_plugins()
    plugins = pm.get_plugins()
    key = (hook_name, backend, frozenset(map(id, plugins)))
    caller = _backend_callers.get(key)
    if caller is None:
        owner = registrations("register_backends", _backend_name, "backend").get(backend, (None, None))[1]
        others = [plugin for plugin in plugins if (pm.get_name(plugin) or str(plugin)) != owner]
        caller = _backend_callers[key] = pm.subset_hook_caller(hook_name, remove_plugins=others)
    return caller


def backends() -> dict[str, Any]:
    """Registered backends by name (:class:`kz_core.model.BackendInfo`)."""
    return {name: item for name, (item, _) in registrations("register_backends", _backend_name, "backend").items()}


def problem_sources() -> dict[str, Any]:
    """Registered problem sources by name, in registration order."""
    return {name: item for name, (item, _) in registrations("register_problem_sources", _source_name, "problem source").items()}


def provided_by_plugin() -> dict[str, list[str]]:
    """What each plugin registered, as ``"backends: cuda, cuda_inline"`` labels."""
    provided: dict[str, dict[str, list[str]]] = {}
    for hook_name, key, what in (
        ("register_backends", _backend_name, "backends"),
        ("register_problem_sources", _source_name, "problem sources"),
        ("register_apis", _backend_name, "APIs"),
    ):
        for name, (_, plugin) in registrations(hook_name, key, what[:-1]).items():
            provided.setdefault(plugin, {}).setdefault(what, []).append(name)
    return {plugin: [f"{what}: {', '.join(names)}" for what, names in kinds.items()] for plugin, kinds in provided.items()}


def apis() -> dict[str, Any]:
    """The API catalog by name (:class:`kz_core.model.ApiSpec`), in registration order."""
    return {name: item for name, (item, _) in registrations("register_apis", _backend_name, "API").items()}


def _backend_name(info: Any) -> str:
    return info.name


def _source_name(source: Any) -> str:
    return source.name
