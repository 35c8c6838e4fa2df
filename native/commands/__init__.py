"""Subcommands of the `llamay` CLI, one module each (see `llamay.native.cli`)."""

MODEL_HELP = "a GGUF path, a stored name (`llamay list`) or an Ollama name (see docs/store.md)"
MODEL_HELP_DEFAULT = f"{MODEL_HELP}; default: the default catalogue model"
