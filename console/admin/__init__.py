"""The admin of organisations, agents, connectors, conversations and runs, one module per concern.

Rich but thin: listings select their relations, displays are ``@admin.display`` methods and
actions call services. Standard model permissions apply; on top of them a staff user who is not a
superuser sees (and may pick in foreign keys) only objects of the organisations where they are an
operator or an admin. Runs, their events and tool executions are read-only records; connector
secrets are write-only.

- :mod:`console.admin.replays`: replays of a proposed chain over an agent's recorded calls;
- :mod:`console.admin.hook_import`: importing hooks from Claude Code or FIM One settings;
- :mod:`console.admin.subpages`: what the pages beside an agent's change page render with;
- :mod:`console.admin.hook_inlines`: hook declarations, edited inline on agents and organisations;
- :mod:`console.admin.organisations`: organisations, memberships, invitations and users;
- :mod:`console.admin.agents`: agents, their effective hook chain and "Try this chain";
- :mod:`console.admin.connectors`: connectors and their actions;
- :mod:`console.admin.records`: conversations, runs, tool executions and the connector call log.

Django's admin autodiscovery imports this package: importing the modules that register model
admins is all it does. It re-exports nothing; import from the module that defines a name.
"""

from __future__ import annotations

from console.admin import agents, connectors, organisations, records  # noqa: F401  (they register)

# What every admin builds on (organisation scoping, archiving, write-only secrets) is the agents
# app's: agents.admin.
