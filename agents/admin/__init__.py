"""The admin of organisations, agents, connectors, conversations and runs, one module per concern.

Rich but thin: listings select their relations, displays are ``@admin.display`` methods and
actions call services. Standard model permissions apply; on top of them a staff user who is not a
superuser sees (and may pick in foreign keys) only objects of the organisations where they are an
operator or an admin. Runs, their events and tool executions are read-only records; connector
secrets are write-only.

- :mod:`agents.admin.scoping`: the organisation-scoping admin bases and mixins (also used by the
  admins of approvals, channels_im, workflows and evals);
- :mod:`agents.admin.archiving`: Archive / Unarchive instead of deletion (docs/design.md §1.9);
- :mod:`agents.admin.bound_secrets`: write-only secrets bound to their address (docs/design.md §1.14);
- :mod:`agents.admin.hook_inlines`: hook declarations, edited inline on agents and organisations;
- :mod:`agents.admin.organisations`: organisations, memberships, invitations and users;
- :mod:`agents.admin.agents`: agents, their effective hook chain and "Try this chain";
- :mod:`agents.admin.connectors`: connectors and their actions;
- :mod:`agents.admin.records`: conversations, runs, tool executions and the connector call log.

Django's admin autodiscovery imports this package: importing the modules that register model
admins is all it does. It re-exports nothing; import from the module that defines a name.
"""

from __future__ import annotations

from agents.admin import agents, connectors, organisations, records  # noqa: F401  (they register)
