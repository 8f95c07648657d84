"""The one place a run's effective hook chain is built (docs/design.md §1.10, §4).

``hook_chain_of(agent)`` (:mod:`agents.checks`) resolves an agent's chain — its declarations,
the system hooks, the gate last — into the plain record ``Run.hook_chain`` keeps; ``run_start``
stores it when the run is created. Every engine gets the run's registry from here, rebuilt from
that record (:func:`hooks.catalog.registry_from_chain`), so editing an agent never changes a run
in flight and a chain that cannot be built stops the run before any tool runs (docs/design.md §1.1).
"""

from __future__ import annotations

from typing import Any

from agents.checks import hook_chain_of
from agents.engine import store
from agents.models import Run
from hooks import HookRegistry
from hooks.catalog import HookDeclarationError, registry_from_chain


class ChainUnavailable(Exception):
    """The run's hook chain cannot be built; ``str()`` says why (shown on the failed run)."""


def run_hook_chain(*, run: Run) -> dict[str, Any]:
    """The chain ``run`` keeps: the one recorded when it was created, or — for a run created
    before runs recorded their chain — its agent's chain resolved once, now, and recorded."""
    if run.hook_chain is not None:
        return run.hook_chain
    return store.run_keep_hook_chain(run_id=run.pk, chain=hook_chain_of(run.agent))


def registry_for_chain(chain: Any, *, owner: str = "agent") -> HookRegistry:
    """The registry a recorded chain describes, or :class:`ChainUnavailable` (fail closed),
    saying whose hooks (``owner``: an agent's, a workflow's) cannot be built."""
    try:
        return registry_from_chain(chain)
    except HookDeclarationError as exc:
        raise ChainUnavailable(f"the {owner}'s hooks cannot be built: {exc}") from None
