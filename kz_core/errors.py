"""One family for the failures a user can fix: every such error derives from :class:`KzError`.

The ``kz`` entry point catches ``KzError`` once and prints its message as one line,
``kz: ...``, exiting with the error's ``exit_code`` (2, a usage error, unless a subclass
says otherwise) instead of a traceback. Anything else that escapes is a bug in kz or a
plugin and keeps its traceback. A plugin raises a subclass (or :class:`kz_core.HookUserError`)
whose message says what to change.
"""

from __future__ import annotations


class KzError(Exception):
    """A failure the user can fix; the message says what to change."""

    #: The exit status of ``kz`` when this error ends a command.
    exit_code = 2
