"""A card click's decision in two statements (PostgreSQL).

The common click, the first vote of a request that one approval settles and any rejection
rejects, not escalated and not edited, on the channel its card went to, is what an approval
platform does most. Through the ORM it cost eleven statements, each compiled in Python, and the
organisation's audit chain stayed locked across several round trips. Here it is:

1. :func:`facts_sql`: one ``SELECT`` of the request (with the agent and requester fields its
   answer card shows) and of everything :func:`approvals.standing.describe_refusal` needs to know
   about the clicker (their :class:`~approvals.standing.Standing`);
2. :func:`verdict_write_async`: one statement, its own transaction, that moves the request out of
   ``pending`` by the same conditional ``UPDATE … WHERE status = 'pending'`` as every other
   decision (docs/design.md §1.4), and only if that update happened records the vote and appends the
   ``decided`` event to the organisation's audit chain, hashed by the database from the
   canonical text Python prepared (:func:`fimone.audit_chain.head_advance_sql`). The chain's head
   row is locked only while PostgreSQL runs that one statement.

Both run on the server's event loop (``channels_im.quick``: the facts joined to the clicker's
identity, in one read). The rules stay in Python, in one place:
``approvals.services.confirmation_decide_click_async`` decides from these facts with
:func:`~approvals.standing.describe_refusal`, and hands every other case (refusals, late clicks,
quorums, escalations, a click answered in a thread, SQLite) to ``confirmation_decide``.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from dataclasses import dataclass
from typing import Any

import psycopg
from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, connections

from agents.models import Agent, HookDeclaration
from approvals.models import (
    ApproverPolicy,
    ConfirmationApprover,
    ConfirmationEvent,
    ConfirmationRequest,
    ConfirmationStatus,
    ConfirmationVote,
    EscalationTier,
)
from approvals.policy import APPROVER_ROLES
from approvals.standing import PolicyFlags, Standing
from fimone import adb, outbox, rows
from fimone.audit_chain import head_advance_sql
from tenancy.models import Membership

#: The agent's and the requester's fields a decided card shows; the others stay deferred.
AGENT_FIELDS = ("id", "name", "owner_id", "organization_id")
USER_FIELDS = ("id", "username", "first_name", "last_name", "is_active")


def available() -> bool:
    """Whether the database can take the two-statement path (PostgreSQL)."""
    return connections[DEFAULT_DB_ALIAS].vendor == "postgresql"


@dataclass(frozen=True)
class ClickFacts:
    """The request as :func:`approvals.selectors.request_for_decision` would load it (agent and
    requester with the fields above), and the clicker's standing on it."""

    request: ConfirmationRequest
    standing: Standing


def _agent_fields() -> tuple[str, ...]:
    return rows.in_field_order(Agent, AGENT_FIELDS)


def _user_fields() -> tuple[str, ...]:
    return rows.in_field_order(get_user_model(), USER_FIELDS)


def _names() -> dict[str, str]:
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
    return {
        "request": quote(ConfirmationRequest._meta.db_table),
        "agent": quote(Agent._meta.db_table),
        "user": quote(get_user_model()._meta.db_table),
        "approver": quote(ConfirmationApprover._meta.db_table),
        "membership": quote(Membership._meta.db_table),
        "policy": quote(ApproverPolicy._meta.db_table),
        "policy_user": quote(ApproverPolicy.named_users.through._meta.db_table),
        "tier": quote(EscalationTier._meta.db_table),
        "tier_user": quote(EscalationTier.named_users.through._meta.db_table),
        "vote": quote(ConfirmationVote._meta.db_table),
        "event": quote(ConfirmationEvent._meta.db_table),
        "agent_history": quote(Agent.history.model._meta.db_table),
        "hook_history": quote(HookDeclaration.history.model._meta.db_table),
        "policy_history": quote(ApproverPolicy.history.model._meta.db_table),
    }


@functools.cache  # our table and column names: the text never changes
def facts_sql(*, user: str) -> str:
    """The facts statement (parameters ``%(request)s``, ``%(organization)s``), where ``user`` is
    the SQL of the clicker's id: a parameter, or a column of a statement it is joined into
    (``channels_im.identities``: the identity a click maps to and these facts, in one read)."""
    names = _names()
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
    request_columns = ", ".join(f"r.{quote(f.column)}" for f in ConfirmationRequest._meta.concrete_fields)
    agent_columns = ", ".join(f"a.{quote(c)}" for c in _agent_fields())
    user_columns = ", ".join(f"u.{quote(c)}" for c in _user_fields())
    roles = ", ".join(f"'{role}'" for role in APPROVER_ROLES)
    agent_or_default = "(h.agent_id = a.id OR (h.agent_id IS NULL AND h.organization_id = a.organization_id))"
    # One row or none; the policy is the agent's own, else its organisation's default
    # (approvals.policy.policy_row); ``user`` is the clicker. The last column says whether the
    # configuration history records the clicker changing the agent, its hooks or its policy
    # (approvals.policy.configured_exists), each probe on the history table's ``history_user_id`` index.
    return (
        f"SELECT {request_columns}, {agent_columns}, {user_columns}, "  # noqa: S608 - our names only
        "ap.tier, ap.stage, ap.delegate_of_id, ap.withdrawn_at IS NOT NULL, "
        f"EXISTS (SELECT 1 FROM {names['membership']} m "
        f"  WHERE m.user_id = {user} AND m.organization_id = r.organization_id), "
        f"EXISTS (SELECT 1 FROM {names['membership']} m "
        f"  WHERE m.user_id = {user} AND m.organization_id = r.organization_id AND m.role IN ({roles})), "
        "p.id, p.allow_self_approval, p.allow_agent_owner, p.allow_initiator, p.allow_org_approvers, "
        f"EXISTS (SELECT 1 FROM {names['policy_user']} n "
        f"  WHERE n.approverpolicy_id = p.id AND n.user_id = {user}), "
        f"EXISTS (SELECT 1 FROM {names['tier_user']} tn "
        f"  JOIN {names['tier']} t ON t.id = tn.escalationtier_id "
        f"  WHERE t.policy_id = p.id AND tn.user_id = {user}), "
        f"(EXISTS (SELECT 1 FROM {names['agent_history']} h "
        f"  WHERE h.history_user_id = {user} AND h.id = a.id) "
        f" OR EXISTS (SELECT 1 FROM {names['hook_history']} h "
        f"  WHERE h.history_user_id = {user} AND {agent_or_default}) "
        f" OR EXISTS (SELECT 1 FROM {names['policy_history']} h "
        f"  WHERE h.history_user_id = {user} AND {agent_or_default})) "
        f"FROM {names['request']} r "
        f"JOIN {names['agent']} a ON a.id = r.agent_id "
        f"JOIN {names['user']} u ON u.id = r.requested_by_id "
        f"LEFT JOIN {names['approver']} ap ON ap.confirmationrequest_id = r.id AND ap.user_id = {user} "
        f"LEFT JOIN LATERAL (SELECT * FROM {names['policy']} pp "
        "  WHERE pp.agent_id = a.id OR (pp.organization_id = a.organization_id AND pp.agent_id IS NULL) "
        "  ORDER BY pp.agent_id IS NULL LIMIT 1) p ON TRUE "
        "WHERE r.id = %(request)s AND r.organization_id = %(organization)s"
    )


def facts_width() -> int:
    """How many columns :func:`facts_sql` selects."""
    return len(rows.all_fields(ConfirmationRequest)) + len(AGENT_FIELDS) + len(USER_FIELDS) + 14


def facts_from_row(row: tuple[Any, ...]) -> ClickFacts:
    """The facts of one row of :func:`facts_sql`."""
    take = rows.taker(row)
    request_fields = rows.all_fields(ConfirmationRequest)
    request = rows.instance(ConfirmationRequest, request_fields, take(len(request_fields)))
    request.agent = rows.instance(Agent, _agent_fields(), take(len(AGENT_FIELDS)))
    request.requested_by = rows.instance(get_user_model(), _user_fields(), take(len(USER_FIELDS)))
    (
        tier,
        stage,
        delegate_of,
        withdrawn,
        member,
        org_approver,
        policy_id,
        *flags,
        named,
        tier_named,
        configured,
    ) = take(14)
    policy = PolicyFlags(*flags) if policy_id is not None else None
    return ClickFacts(
        request=request,
        standing=Standing(
            tier=tier,
            stage=stage or 0,
            # A stand-in's click is decided the long way (their standing is their delegator's).
            delegate_of=delegate_of,
            withdrawn=bool(withdrawn),
            member=member,
            org_approver=org_approver,
            policy=policy,
            named_by_policy=bool(named) and policy is not None,
            named_by_a_tier=bool(tier_named) and policy is not None,
            configured=bool(configured),
        ),
    )


@dataclass(frozen=True)
class Verdict:
    """A verdict to write by :func:`verdict_write_async`: ``event`` is the ``decided`` event, unsaved,
    its ``created_at`` set; ``follow_up`` the Celery task (name, arguments) the outbox sends once
    it commits (:mod:`fimone.outbox`), or ``None`` when the caller follows the verdict up itself
    after commit."""

    request: ConfirmationRequest
    verdict: ConfirmationStatus
    user_id: int
    external_id: str
    reason: str
    now: dt.datetime
    event: ConfirmationEvent
    follow_up: tuple[str, list[Any]] | None = None


async def verdict_write_async(db: psycopg.AsyncConnection, verdict: Verdict) -> bool:
    """Settle the request with the verdict and record the vote, the event and the follow-up, all
    or nothing, in one statement on ``db`` (:mod:`fimone.adb`, autocommit: the statement is its
    own transaction). ``False`` when the request was no longer pending and unexpired, had been
    escalated or, for an approval, its arguments edited since it was read: then nothing was
    written. A failure (a head row missing, a vote already there) raises
    ``psycopg.IntegrityError`` and leaves nothing behind."""
    sql, params = _verdict_statement(verdict)
    row = await adb.fetchone(db, sql, params)
    return bool(row[0])


def _verdict_statement(verdict: Verdict) -> tuple[str, list[Any]]:
    names = _names()
    connection = connections[DEFAULT_DB_ALIAS]
    event, now = verdict.event, verdict.now
    head_sql, head_params = head_advance_sql(event, condition="EXISTS (SELECT 1 FROM upd)")
    approve = verdict.verdict == ConfirmationStatus.APPROVED
    edited_guard = " AND edited_by_id IS NULL" if approve else ""
    follow_up_sql, follow_up_params = "", []
    if verdict.follow_up is not None:
        task, args = verdict.follow_up
        insert, follow_up_params = outbox.insert_sql(task=task, args=args, source="upd")
        follow_up_sql = f", outbox AS ({insert})"
    sql = (
        f"WITH upd AS (UPDATE {names['request']} SET status = %s, responded_at = %s, "  # noqa: S608
        "responded_by_id = %s, responded_by_external_id = %s, reason = %s "
        f"WHERE id = %s AND status = %s AND expires_at > %s AND escalation_level = 0{edited_guard} "
        "RETURNING id), "
        f"vote AS (INSERT INTO {names['vote']} "
        "(request_id, user_id, approve, reason, external_id, created_at) "
        "SELECT id, %s, %s, %s, %s, %s FROM upd), "
        f"head AS ({head_sql}), "
        f"ev AS (INSERT INTO {names['event']} "
        "(organization_id, request_id, kind, actor_id, actor_external_id, "
        "details, created_at, chain_seq, prev_hash, entry_hash) "
        "SELECT %s, upd.id, %s, %s, %s, %s::jsonb, %s, head.seq, head.prev_hash, head.entry_hash "
        "FROM upd LEFT JOIN head ON TRUE)"  # no head row: NULL chain_seq fails the whole statement
        f"{follow_up_sql} "
        "SELECT count(*) FROM upd"
    )
    adapt = connection.ops.adapt_datetimefield_value
    params = [
        str(verdict.verdict),
        adapt(now),
        verdict.user_id,
        verdict.external_id,
        verdict.reason,
        verdict.request.pk,
        ConfirmationStatus.PENDING,
        adapt(now),
        verdict.user_id,
        approve,
        verdict.reason,
        verdict.external_id,
        adapt(now),
        *head_params,
        event.organization_id,
        str(event.kind),
        event.actor_id,
        event.actor_external_id,
        json.dumps(event.details),
        adapt(event.created_at),
        *follow_up_params,
    ]
    return sql, params
