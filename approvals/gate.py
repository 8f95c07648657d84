"""The confirmation gate: the PreToolUse hook that makes a human approve a tool call.

Attached by the engine to every agent (``system``), it runs last among PreToolUse hooks so it sees
the final arguments. It opens (or finds) the :class:`ConfirmationRequest` for ``(run,
tool_call_id)``, waits inline for a short window — woken through the channel layer — and, if
nobody decided, suspends the run: nothing waits in memory after that (docs/design.md §1.6). On resume it
finds the decided request and answers at once.

An approval is bound to the hash of the arguments it was asked for: the gate answers it as
``HookResult.approved_args_sha256`` with the request's id (honoured by the registry from system
hooks only, never read from ``metadata``) and the engine refuses to run anything else
(docs/design.md §1.3, §1.10). Its ``approval.pending`` / ``approval.decided`` events go through
``ctx.events``, which the registry gives to system hooks only.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.utils import timezone

from agents import events as ev
from agents.engine import jsonsafe
from agents.engine.db import db
from agents.engine.store import args_sha256, run_load
from approvals import presentation, services
from approvals.models import ConfirmationApprover, ConfirmationEvent, ConfirmationRequest, ConfirmationStatus
from approvals.selectors import display_name, request_for_call, request_status, stage_heading, vote_summary
from approvals.waking import wait_for_verdict
from fimone import telemetry
from hooks.catalog import register_hook
from hooks.contract import (
    GATE_PRIORITY,
    Band,
    HookContext,
    HookResult,
    PostToolUseHook,
    PreToolUseHook,
    SuspendRun,
    needs_approval,
)

APPROVAL_PENDING = ev.APPROVAL_PENDING
APPROVAL_DECIDED = ev.APPROVAL_DECIDED


def _approval_payload(request: ConfirmationRequest, approvers: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``approval.pending`` event: the call as approvers read it (``tool_title``, ``context``:
    ``[{"label", "value"}]`` in text for people, :mod:`approvals.presentation`) beside the exact
    ``arguments``."""
    return {
        "request_id": str(request.pk),
        "tool_call_id": request.tool_call_id,
        "tool": request.tool_name,
        "tool_title": request.tool_title or presentation.title_of(request.tool_name),
        "arguments": request.tool_args,
        "context": request.context or [],
        "approvers": approvers,
        "expires_at": request.expires_at.isoformat(),
        "channel": request.channel,
        "approvals_required": request.approvals_required,
        **({"stage": stage_heading(request)} if request.stage_plan else {}),
    }


def _decided_payload(request: ConfirmationRequest, *, delivery_problem: str | None) -> dict[str, Any]:
    """The ``approval.decided`` event, with every vote of the request (``votes``: ``[{"by",
    "approve", "at", "reason"}]``, oldest first; ``approvals``: how many approved). Reads the
    votes: call it off the event loop."""
    summary = vote_summary(request=request)
    return {
        "request_id": str(request.pk),
        "tool_call_id": request.tool_call_id,
        "status": request.status,
        "by": display_name(request.responded_by) if request.responded_by_id else None,
        "reason": request.reason,
        "at": request.responded_at.isoformat() if request.responded_at else None,
        "delivery_problem": delivery_problem,
        "edited_by": display_name(request.edited_by) if request.edited_by_id else None,
        "arguments": request.tool_args,
        "votes": summary["votes"],
        "approvals": summary["approvals"],
    }


def _facts(*, run_id: int, ctx: HookContext) -> presentation.CallFacts | None:
    """How to describe the call to approvers, when its request is still to open (``None`` when
    it exists: a resumed run re-enters the same call)."""
    run = run_load(run_id=run_id)
    if request_for_call(run_id=run.pk, tool_call_id=ctx.metadata["tool_call_id"]) is not None:
        return None
    return presentation.call_facts(agent=run.agent, tool_name=ctx.tool_name)


def _open(
    *,
    run_id: int,
    ctx: HookContext,
    digest: str,
    facts: presentation.CallFacts | None = None,
    context: list[dict[str, str]] | None = None,
) -> tuple[services.Opened, list[dict[str, Any]]]:
    opened = services.confirmation_request_open(
        run=run_load(run_id=run_id),
        tool_call_id=ctx.metadata["tool_call_id"],
        tool_name=ctx.tool_name,
        tool_args=ctx.tool_args,
        args_sha256=digest,
        facts=facts,
        context=context,
        schema=ctx.tool_schema,
    )
    # Who may decide now: a staged request's current stage (stand-ins included, reassigned not).
    request = opened.request
    asked = ConfirmationApprover.objects.filter(
        request_id=request.pk, stage=request.stage_index, withdrawn_at__isnull=True
    ).select_related("user")
    approvers = [{"id": row.user_id, "name": display_name(row.user)} for row in asked.order_by("user_id")]
    return opened, approvers


def _reload(*, request_id: Any) -> ConfirmationRequest:
    return ConfirmationRequest.objects.select_related("responded_by", "edited_by").get(pk=request_id)


def _editor_name(*, request: ConfirmationRequest) -> str:
    return display_name(request.edited_by)


def edit_note(request: ConfirmationRequest) -> str:
    """What the LLM is told when an approver changed the arguments: who, and what changed."""
    proposed = request.proposed_args if isinstance(request.proposed_args, dict) else {}
    approved = request.tool_args if isinstance(request.tool_args, dict) else {}
    changes = []
    for key in sorted(set(proposed) | set(approved)):
        if key not in approved:
            changes.append(f"{key} removed (was {json.dumps(proposed[key], ensure_ascii=False)})")
        elif key not in proposed:
            changes.append(f"{key} added ({json.dumps(approved[key], ensure_ascii=False)})")
        elif proposed[key] != approved[key]:
            before = json.dumps(proposed[key], ensure_ascii=False)
            after = json.dumps(approved[key], ensure_ascii=False)
            changes.append(f"{key} changed from {before} to {after}")
    what = "; ".join(changes) or "the arguments were changed"
    return (
        f"Note: the approver {display_name(request.edited_by)} changed the arguments before approving "
        f"({what}). The call ran with the changed arguments."
    )


def _delivery_problem(*, request_id: Any) -> str | None:
    failure = (
        ConfirmationEvent.objects.filter(request_id=request_id, kind=ConfirmationEvent.Kind.DELIVERY_FAILED)
        .order_by("-pk")
        .values_list("details", flat=True)
        .first()
    )
    delivered = ConfirmationEvent.objects.filter(
        request_id=request_id, kind=ConfirmationEvent.Kind.DELIVERED
    ).exists()
    if failure is None or delivered:
        return None
    return str(failure.get("error") or "unknown error")


def observation_for(request: ConfirmationRequest, *, delivery_problem: str | None = None) -> str:
    """What the LLM reads for a final, non-approved outcome. Plain and final."""
    if request.status == ConfirmationStatus.REJECTED:
        who = display_name(request.responded_by)
        reason = request.reason or "no reason given"
        return f"Rejected by {who}: {reason}. The call was not executed. Do not retry it."
    if request.status == ConfirmationStatus.EXPIRED:
        text = f"No decision within {request.timeout_seconds} s: the call was not executed."
        if delivery_problem:
            text += f" The approval request could not be delivered to approvers ({delivery_problem})."
        return text + " Do not retry it unless the user asks."
    if request.status == ConfirmationStatus.CANCELLED:
        return "The approval request was cancelled: the call was not executed."
    return f"The call was not executed (approval {request.status})."


@register_hook
class ConfirmationGateHook(PreToolUseHook):
    name = "confirmation_gate"
    system = True
    asks_humans = True
    band = Band.GATE
    priority = GATE_PRIORITY
    on_error = "block"
    # The inline window is bounded by the policy; this only guards against a hung database.
    timeout = 600.0

    def should_trigger(self, ctx: HookContext) -> bool:
        """The call needs a human (:func:`hooks.contract.needs_approval`, the predicate the
        registry folds too: a flagged tool, an agent that confirms everything, an earlier hook
        that asked). Read from the context as given, so a caller that runs the gate outside a
        registry is answered the same; it can only add the gate, never remove it."""
        return needs_approval(ctx)

    async def execute(self, ctx: HookContext) -> HookResult:
        run_id = ctx.metadata["run_id"]
        sink = ctx.events  # given by the registry to system hooks only
        digest = args_sha256(ctx.tool_args)
        # The call's context action is an HTTP call: made here, on the loop, between two short
        # reads, never inside the transaction that opens the request (the service it asks may be
        # this very server, answering from the thread the database work runs in).
        facts = await db(_facts, run_id=run_id, ctx=ctx)
        context = await presentation.context_read(facts, ctx.tool_args) if facts is not None else None
        try:
            opened, approvers = await db(
                _open, run_id=run_id, ctx=ctx, digest=digest, facts=facts, context=context
            )
        except services.NoApprovers as exc:
            return HookResult(allow=False, error=f"The call needs approval, but {exc}. It was not executed.")
        request = opened.request
        # A call a standing approval covers is approved as it opens: nobody is asked.
        if opened.created and sink is not None and request.status == ConfirmationStatus.PENDING:
            await sink.publish(APPROVAL_PENDING, _approval_payload(request, approvers))
        # The request's status is reported first: a rejected, expired or cancelled call is told
        # so whatever its arguments; only an *approved* request with other arguments is refused
        # as "arguments changed" (an approval covers exactly the arguments it was asked for).
        status = request.status
        if status == ConfirmationStatus.PENDING and opened.created:
            status = await wait_for_verdict(
                request.pk, window=opened.inline_wait_seconds, poll=settings.APPROVAL_POLL_SECONDS
            )
        if status != ConfirmationStatus.PENDING:
            request = await db(_reload, request_id=request.pk)
            status = request.status
        if status == ConfirmationStatus.PENDING:
            request_id = request.pk

            async def still_waiting() -> bool:
                return await db(request_status, request_id=request_id) == ConfirmationStatus.PENDING

            raise SuspendRun(
                "waiting for approval",
                detail={"request_id": str(request_id), "expires_at": request.expires_at.isoformat()},
                still_waiting=still_waiting,
            )
        _trace_verdict(request)
        problem = None
        if request.status == ConfirmationStatus.EXPIRED:  # say why, if nobody could be reached
            problem = await db(_delivery_problem, request_id=request.pk)
        if sink is not None:
            # Stored with the write that follows at once (the tool's start, or the blocked call).
            payload = await db(_decided_payload, request=request, delivery_problem=problem)
            await sink.publish(APPROVAL_DECIDED, payload, at_once=False)
        # The call is recognised by the arguments it was proposed with; an approver's edit then
        # replaces them (below) and the engine binds to the hash of the edited ones.
        if request.status == ConfirmationStatus.APPROVED and request.requested_args_sha256 != digest:
            return HookResult(
                allow=False,
                error=(
                    "Refused: the arguments changed after approval was requested. The call was not executed."
                ),
                side_effects=[f"arguments differ from approval request {request.pk}"],
            )
        if request.status == ConfirmationStatus.APPROVED:
            effects = [f"approved by {display_name(request.responded_by)}"]
            if request.was_edited:
                effects.append(
                    f"arguments changed by {await db(_editor_name, request=request)} before approval"
                )
            return HookResult(
                side_effects=effects,
                # Exactly the approved arguments run: the edited ones when an approver changed them.
                modified_args=dict(request.tool_args) if request.was_edited else None,
                approved_args_sha256=request.args_sha256,
                confirmation_request_id=str(request.pk),
            )
        return HookResult(
            allow=False,
            error=observation_for(request, delivery_problem=problem),
            side_effects=[f"approval {request.status}"],
        )


def _trace_verdict(request: ConfirmationRequest) -> None:
    """The request's span, from its opening to its verdict, as a child of the tool call that
    asked (its stored context), recorded by the run that learns the verdict: the one place every
    verdict reaches, however it was given (fimone/telemetry.py)."""
    if not telemetry.ENABLED:
        return
    ended = request.responded_at or timezone.now()
    attributes = {
        "fim.approval.id": str(request.pk),
        "fim.approval.status": str(request.status),
        "fim.approval.channel": request.channel or "web",
        "fim.approval.stages": len(request.stage_plan or []) or 1,
        "fim.run.id": request.run_id,
        "fim.tool": request.tool_name,
        "fim.tool.call_id": request.tool_call_id,
    }
    if request.responded_by_id is not None:
        attributes["fim.approval.decided_by"] = request.responded_by_id
    telemetry.record_span(
        "fim.approval",
        parent=request.trace_context,
        start=request.created_at,
        end=ended,
        attributes=attributes,
        error=request.status != ConfirmationStatus.APPROVED,
    )
    telemetry.approval_decided(
        status=str(request.status), seconds=(ended - request.created_at).total_seconds()
    )


@register_hook
class ConfirmationExecutedHook(PostToolUseHook):
    """Appends ``executed`` to the log of the request that approved this call, and tells the LLM
    when the approver changed the arguments (the result then starts with :func:`edit_note`)."""

    name = "confirmation_executed"
    system = True
    band = Band.GUARD
    priority = 0
    on_error = "allow"  # the audit note must not hide the tool's result

    def should_trigger(self, ctx: HookContext) -> bool:
        # Set by the engine from the gate's own answer, never read from metadata (any hook can
        # write there, and could name another organisation's request).
        return ctx.confirmation_request_id is not None

    async def execute(self, ctx: HookContext) -> HookResult:
        await db(
            services.confirmation_log_executed,
            request_id=ctx.confirmation_request_id,
            tool_status=str(ctx.metadata.get("tool_status", "")),
        )
        request = await db(_reload, request_id=ctx.confirmation_request_id)
        if not request.was_edited:
            return HookResult()
        # The model proposed other arguments than those that ran: it must know, or it would
        # report the call as it proposed it.
        return HookResult(modified_result=f"{edit_note(request)}\nResult: {jsonsafe.text(ctx.tool_result)}")


def pretty_arguments(args: Any) -> str:
    return json.dumps(args, indent=2, ensure_ascii=False, sort_keys=True)
