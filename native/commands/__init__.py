"""Subcommands of the `llamay` CLI, one module each (see `llamay.native.cli`)."""
