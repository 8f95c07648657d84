"""The hook editor of the admin: a hook declaration's parameters as a form built from the catalog
hook's parameter schema, and the effective chain of an agent as rows an operator reads.

Parameters are typed into one input per schema property (numbers, choices, one pattern per line,
rows of conditions, JSON only for free-form objects) and stored as the declaration's ``params``
object. Command, python and http hooks, and catalog hooks that do not describe their parameters,
keep a JSON text box. The page's own script only shows the inputs of the hook picked; without it
every hook's inputs show and only the picked hook's are read.

Its modules, each importing only those listed after it:

- :mod:`~console.hook_editor.hook_params`: the ``params`` field and widget of a declaration;
- :mod:`~console.hook_editor.tool_args`: the arguments field and widget of "Try this chain";
- :mod:`~console.hook_editor.approval_reasons`: why the approval gate asks, and where to change it;
- :mod:`~console.hook_editor.effective_chain`: the chain a run executes, as rows;
- :mod:`~console.hook_editor.readable`: parameters as text people read;
- :mod:`~console.hook_editor.param_inputs`: the HTML inputs of one parameter or a list of objects;
- :mod:`~console.hook_editor.catalog_choices`: the hooks an operator may pick, and their schemas;
- :mod:`~console.hook_editor.param_values`: one parameter's input kind, reading and showing.

The names below are the editor's public face, importable from the package itself.
"""

from __future__ import annotations

from console.hook_editor.approval_reasons import (
    ASKING_HOOKS,
    CONFIRMS_ALL,
    Why,
    connector_action_url,
    gate_reasons,
    hook_ask_reason,
    tool_flag_reason,
)
from console.hook_editor.catalog_choices import (
    OWN_KINDS,
    OWN_PREFIX,
    chooses_tools,
    declarable_entries,
    hook_choices,
)
from console.hook_editor.effective_chain import SOURCE_LABELS, SYSTEM_NOTES, ChainRow, chain_rows
from console.hook_editor.hook_params import HookParamsField, HookParamsWidget, ParamsInput
from console.hook_editor.param_inputs import CONDITION_ROWS
from console.hook_editor.param_values import format_value, param_kind, read_value
from console.hook_editor.readable import (
    describe_condition,
    describe_conditions,
    readable_params,
    readable_value,
)
from console.hook_editor.tool_args import ArgsInput, ToolArgsField, ToolArgsWidget

__all__ = [
    "ASKING_HOOKS",
    "CONDITION_ROWS",
    "CONFIRMS_ALL",
    "OWN_KINDS",
    "OWN_PREFIX",
    "SOURCE_LABELS",
    "SYSTEM_NOTES",
    "ArgsInput",
    "ChainRow",
    "HookParamsField",
    "HookParamsWidget",
    "ParamsInput",
    "ToolArgsField",
    "ToolArgsWidget",
    "Why",
    "chain_rows",
    "chooses_tools",
    "connector_action_url",
    "declarable_entries",
    "describe_condition",
    "describe_conditions",
    "format_value",
    "gate_reasons",
    "hook_ask_reason",
    "hook_choices",
    "param_kind",
    "read_value",
    "readable_params",
    "readable_value",
    "tool_flag_reason",
]
