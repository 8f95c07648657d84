"""Declarative hook kinds: a shell command, a Python hook by dotted path, an HTTP endpoint.

Each kind is a :class:`hooks.contract.Hook` built from a declaration (``hooks.catalog.build_item``);
command and http hooks speak Claude Code's hook protocol (:mod:`hooks.kinds.protocol`).
"""

from hooks.kinds.base import DeclaredHook, Matcher
from hooks.kinds.command import CommandHook
from hooks.kinds.http import HttpHook
from hooks.kinds.python import load_python_hook

__all__ = ["CommandHook", "DeclaredHook", "HttpHook", "Matcher", "load_python_hook"]
