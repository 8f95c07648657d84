"""Archiving agents, connectors and organisations (HackSoft style: ``<entity>_<verb>``,
keyword-only, atomic).

Nothing with history is deleted (docs/design.md §1.9): agents, connectors and organisations are archived
instead. An archived agent (or any agent of an archived organisation) cannot start a run, and its
runs in flight end: queued and suspended runs are cancelled at once (their pending requests are
withdrawn), running ones stop at their next step. An archived connector's tools are no longer
offered. History (runs, events, approvals) stays readable. Unarchiving restores what can run from
then on; nothing stopped by the archiving is restarted.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from agents.hook_declarations import may_manage_code_hooks
from agents.models import Agent, Connector, Run
from agents.services import runs_stop
from fimone.errors import ServiceError
from tenancy.models import Organization
from tenancy.permissions import check_operator, check_organization_admin


@transaction.atomic
def agent_archive(*, agent: Agent, user: Any) -> Agent:
    """Archive ``agent`` as an operator of its organisation: it can no longer run and its runs in
    flight end. Refused (``conflict``) if it is already archived."""
    check_operator(user=user, organization_id=agent.organization_id)
    locked = _locked_to_change(Agent, agent, archive=True, noun="agent")
    _archived_set(locked, by=user)
    runs_stop(runs=Run.objects.filter(agent=locked), error=f"the agent was archived by {user.get_username()}")
    return locked


@transaction.atomic
def agent_unarchive(*, agent: Agent, user: Any) -> Agent:
    """Make an archived agent runnable again (if its organisation is not archived). Runs stopped by
    the archiving stay stopped. Refused (``conflict``) if it is not archived."""
    check_operator(user=user, organization_id=agent.organization_id)
    locked = _locked_to_change(Agent, agent, archive=False, noun="agent")
    _archived_set(locked, by=None)
    return locked


@transaction.atomic
def connector_archive(*, connector: Connector, user: Any) -> Connector:
    """Archive ``connector``: its tools are no longer offered to any agent (from each run's next
    start or resume; a call proposed after that is refused as an unknown tool, even if it was
    approved). Its actions stay attached, so unarchiving restores them."""
    check_operator(user=user, organization_id=connector.organization_id)
    locked = _locked_to_change(Connector, connector, archive=True, noun="connector")
    _archived_set(locked, by=user)
    return locked


def check_may_unarchive_connector(*, connector: Connector, user: Any) -> None:
    """Refuse (``forbidden``) bringing back an MCP server run here over stdio to someone without the
    code-hooks permission: its command runs on the platform's machines again, and creating or
    changing one needs that permission (:func:`agents.mcp_connectors.check_may_set_command`)."""
    if connector.runs_a_command and not may_manage_code_hooks(user):
        raise ServiceError(
            "this MCP server runs a command on this platform (stdio): bringing it back needs the "
            "'Can create or change command, python and http hooks' permission, as creating one does",
            code="forbidden",
        )


@transaction.atomic
def connector_unarchive(*, connector: Connector, user: Any) -> Connector:
    """Offer an archived connector's tools again. Refused (``conflict``) if it is not archived;
    (``forbidden``) if it runs a command here and ``user`` may not manage code hooks
    (:func:`check_may_unarchive_connector`, decided on the locked row: the command it would run)."""
    check_operator(user=user, organization_id=connector.organization_id)
    locked = _locked_to_change(Connector, connector, archive=False, noun="connector")
    check_may_unarchive_connector(connector=locked, user=user)
    _archived_set(locked, by=None)
    return locked


@transaction.atomic
def organization_archive(*, organization: Organization, user: Any) -> Organization:
    """Archive ``organization`` as one of its admins (or a superuser): none of its agents can run
    and their runs in flight end. Its agents' own archive state is left as it is."""
    check_organization_admin(user=user, organization_id=organization.pk)
    locked = _locked_to_change(Organization, organization, archive=True, noun="organisation")
    # Lock the agents too: a run start holds its agent's lock, so none slips in unseen.
    list(Agent.objects.select_for_update().filter(organization=locked).order_by("pk").values_list("pk"))
    _archived_set(locked, by=user)
    runs_stop(
        runs=Run.objects.filter(agent__organization=locked),
        error=f"the organisation was archived by {user.get_username()}",
    )
    return locked


@transaction.atomic
def organization_unarchive(*, organization: Organization, user: Any) -> Organization:
    """Let an archived organisation's (unarchived) agents run again. Refused (``conflict``) if it
    is not archived."""
    check_organization_admin(user=user, organization_id=organization.pk)
    locked = _locked_to_change(Organization, organization, archive=False, noun="organisation")
    _archived_set(locked, by=None)
    return locked


def _locked_to_change(model: type[Any], obj: Any, *, archive: bool, noun: str) -> Any:
    """``obj``'s row locked, if archiving it (``archive``) or unarchiving it changes something;
    else ``conflict`` naming the ``noun``."""
    locked = model.objects.select_for_update().get(pk=obj.pk)
    if (locked.archived_at is not None) == archive:
        raise ServiceError(f"the {noun} is {'already' if archive else 'not'} archived", code="conflict")
    return locked


def _archived_set(locked: Any, *, by: Any | None) -> None:
    """Archive ``locked`` (by that user) or, with ``by=None``, unarchive it."""
    locked.archived_at, locked.archived_by = (timezone.now(), by) if by is not None else (None, None)
    locked.save(update_fields=["archived_at", "archived_by"])
