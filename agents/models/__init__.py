"""The models of the agents app, one module per concern. Every model, and every name other modules
import, is exported here: ``from agents.models import Run`` is how the rest of the project reads
them, and the migrations name ``agents.models.validate_tool_slug`` and ``validate_action_name``.

Each module imports only modules listed before it, never this package:

- ``bound_secrets``: the mixin and queryset that bind stored secrets to their address;
- ``connectors``: connectors and their actions (tools);
- ``agents``: agents;
- ``runs``: conversations, runs and their trace;
- ``hooks``: hook declarations of agents and organisations;
- ``call_logs``: the hash-chained connector call log;
- ``shadow_decisions``: the hash-chained record of what hooks in shadow mode would have done;
- ``replays``: proposed hook chains replayed over recorded calls.
"""

# isort: off
# Imported in the order above, which is the order the models are registered in (content types and
# permissions are created in that order).
from agents.models.bound_secrets import SECRETS_CLEARED, SecretsBoundQuerySet, SecretsBoundToAddress
from agents.models.connectors import (
    SLUG_RE,
    WRITE_METHODS,
    Connector,
    ConnectorAction,
    ConnectorQuerySet,
    humanized_name,
    mcp_server_claim,
    validate_action_name,
    validate_tool_slug,
)
from agents.models.agents import Agent
from agents.models.runs import (
    TERMINAL_RUN_STATUSES,
    Conversation,
    ExecutionPath,
    Run,
    RunEvent,
    RunMessage,
    RunStatus,
    ToolExecution,
)
from agents.models.hooks import HookDeclaration
from agents.models.call_logs import ConnectorCallLog
from agents.models.shadow_decisions import ShadowDecision
from agents.models.replays import ChainReplay
# isort: on

# django-simple-history creates each historical model (``Agent.history.model``) as its model
# is declared; for a model declared in a submodule it names the app package ("agents") as the
# historical model's module, which does not hold it. They belong to this package, as when the
# models were one module: exported here and named after it, so that a pickled class or queryset of
# one, which refers to its class by module and name, loads again.
HistoricalConnector = Connector.history.model
HistoricalAgent = Agent.history.model
HistoricalHookDeclaration = HookDeclaration.history.model
for _historical in (HistoricalConnector, HistoricalAgent, HistoricalHookDeclaration):
    _historical.__module__ = __name__
del _historical

__all__ = [
    "SECRETS_CLEARED",
    "SLUG_RE",
    "TERMINAL_RUN_STATUSES",
    "WRITE_METHODS",
    "Agent",
    "ChainReplay",
    "Connector",
    "ConnectorAction",
    "ConnectorCallLog",
    "ConnectorQuerySet",
    "Conversation",
    "ExecutionPath",
    "HistoricalAgent",
    "HistoricalConnector",
    "HistoricalHookDeclaration",
    "HookDeclaration",
    "Run",
    "RunEvent",
    "RunMessage",
    "RunStatus",
    "SecretsBoundQuerySet",
    "SecretsBoundToAddress",
    "ShadowDecision",
    "ToolExecution",
    "humanized_name",
    "mcp_server_claim",
    "validate_action_name",
    "validate_tool_slug",
]
