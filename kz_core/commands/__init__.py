"""The core's own ``kz`` subcommands, each module a default plugin (``register_commands``)."""
