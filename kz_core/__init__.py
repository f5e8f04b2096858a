"""kz: train language models to write fast, correct GPU kernels (the KernelZero method).

The core holds the plugin system, the data model, configuration, problem sources and the
``kz`` command line. Plugins write ``from kz_core import hookimpl``.
"""

from kz_core.errors import KzError
from kz_core.hookspecs import HookUserError, hookimpl, hookspec

__all__ = ["HookUserError", "KzError", "__version__", "hookimpl", "hookspec"]

__version__ = "0.1.0"
