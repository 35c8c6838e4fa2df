"""KV state: paged storage for keys and values (the radix prefix cache builds on these pages)."""

from .pages import KVPages, OutOfPages

__all__ = ["KVPages", "OutOfPages"]
