"""Bring your hooks: a Claude Code settings file, or a FIM One agent configuration, turned into
an agent's hook declarations.

Reading is pure: :func:`claude_settings_plan` and :func:`fim_one_config_plan` take the file's
text and return an :class:`ImportPlan` — the declarations it becomes (not saved) and every item
left out, with why — or raise :class:`HookImportError` for a file that cannot be read at all
(not JSON, a block of the wrong shape, an unknown FIM One hook name). :func:`hook_import_save`
then appends a plan's declarations to an agent's own, all or nothing, through
:func:`agents.hook_declarations.hook_declaration_save`: the code-hooks permission and every check
of a declaration apply (``actor=None`` is the operator console, trusted).

Claude Code (its settings' ``hooks`` block)::

    {"hooks": {"PreToolUse": [{"matcher": "Bash",
                               "hooks": [{"type": "command", "command": "…", "timeout": 30}]}]}}

- events this platform has (PreToolUse, PostToolUse, SessionStart) become ``command``
  declarations; every other event, and every hook type but ``command``, is skipped, with why;
- matchers (:func:`claude_matcher`): Claude Code matches tool names; ours are
  ``<connector slug>__<tool>``, so a name or regex ``X`` becomes ``re:(?:<slug>__)?(?:X)``; one
  that starts with ``mcp__`` (an MCP tool in Claude Code's spelling) is kept as it is;
- commands (:func:`claude_command_argv`) are split into an argv without a shell; anything that
  needs one is refused, naming it. ``$CLAUDE_PROJECT_DIR`` is the project directory the operator
  gives (and, as in Claude Code, the hook's environment has it too); a bare program name is
  looked up on ``PATH``;
- a hook's ``timeout`` (seconds) is the declaration's.

FIM One (``model_config_json.hooks``): each of FIM One's built-in names becomes the hook of ours
that does the same (:data:`agents.fim_one_hooks.FIM_ONE_HOOKS`); our own catalog names are taken
as they are; any other name refuses the file, listing the names known.
"""

from __future__ import annotations

from console.hook_import.claude import (
    CommandRefused,
    claude_command_argv,
    claude_matcher,
    claude_settings_plan,
)
from console.hook_import.fim_one import fim_one_config_plan
from console.hook_import.plans import (
    CLAUDE,
    FIM_ONE,
    SOURCES,
    HookImportError,
    ImportPlan,
    PlannedHook,
    Skipped,
)
from console.hook_import.saving import hook_import_plan, hook_import_save

__all__ = [
    "CLAUDE",
    "FIM_ONE",
    "SOURCES",
    "CommandRefused",
    "HookImportError",
    "ImportPlan",
    "PlannedHook",
    "Skipped",
    "claude_command_argv",
    "claude_matcher",
    "claude_settings_plan",
    "fim_one_config_plan",
    "hook_import_plan",
    "hook_import_save",
]
