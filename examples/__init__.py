"""Example problems shipped with kz (installed as the package ``kz_core.examples``)."""
