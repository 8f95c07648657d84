"""Editing on approve: an approver may replace the proposed arguments by their own, when the
request's policy allows it, before anybody voted on the proposed ones (docs/design.md §1.3). The engine
then binds the approval to the hash of the edited arguments.
"""

from __future__ import annotations

from typing import Any

from agents.engine.store import args_sha256
from agents.tools.schema import argument_errors
from agents.tools.toolbox import ToolboxError, tools_for_agent
from approvals.models import ConfirmationRequest, ConfirmationStatus
from approvals.services.event_log import Kind, log_event
from fimone.storable import unstorable


def edit_problem(
    *, request: ConfirmationRequest, edited_args: Any, approve: bool = True, via_channel_id: int | None = None
) -> str | None:
    """Why ``edited_args`` may not replace ``request``'s arguments (``None`` when they may): the
    policy must allow edits, only an approval carries them, only from the web inbox or the API
    (a chat button cannot), and they must satisfy the tool's parameter schema as the agent's
    toolbox declares it now."""
    if not request.allow_edit_on_approve:
        return "this request's approver policy does not allow changing the arguments"
    if not approve:
        return "only an approval can change the arguments"
    if via_channel_id is not None:
        return "arguments can only be changed in the web inbox"
    if not isinstance(edited_args, dict):
        return "the arguments must be a JSON object"
    unfit = unstorable(edited_args, name="the arguments")  # NaN, ±Infinity, NUL: named in words
    if unfit is not None:
        return unfit
    try:
        tool = tools_for_agent(request.agent).get(request.tool_name)
    except ToolboxError as exc:
        return f"the agent's tools cannot be read ({exc})"
    if tool is None:
        return f"the tool {request.tool_name} is no longer available to this agent"
    problems = argument_errors(tool.spec.parameters, edited_args)
    if problems:
        return "they do not fit the tool's parameters: " + "; ".join(problems[:5])
    return None


def apply_edit(
    *, request: ConfirmationRequest, edited_args: dict[str, Any], user: Any, external_id: str
) -> None:
    """Replace the proposed arguments by the approver's (the caller holds the request's lock and
    checked :func:`edit_problem`). The proposed ones are kept on the request and in the log."""
    proposed, proposed_hash = request.tool_args, request.args_sha256
    written = {
        "tool_args": edited_args,
        "args_sha256": args_sha256(edited_args),
        "proposed_args": proposed,
        "proposed_args_sha256": proposed_hash,
        "edited_by": user,
    }
    ConfirmationRequest.objects.filter(pk=request.pk, status=ConfirmationStatus.PENDING).update(**written)
    for field, value in written.items():
        setattr(request, field, value)
    log_event(
        request_id=request.pk,
        kind=Kind.EDITED,
        actor=user,
        external_id=external_id,
        proposed_args=proposed,
        proposed_args_sha256=proposed_hash,
        approved_args=edited_args,
        approved_args_sha256=written["args_sha256"],
    )
