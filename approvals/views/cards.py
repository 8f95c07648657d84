"""A request as the pages show it (:class:`RequestCard`): the inbox, the request page and the
history all read requests through it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from agents.models import ExecutionPath
from approvals import presentation, selectors
from approvals.event_lines import reason_for_people, stopped_by
from approvals.gate import pretty_arguments
from approvals.models import ConfirmationRequest, ConfirmationStatus
from approvals.selectors import display_name
from fimone.humanize import ago, clipped

#: Where a request's run was started, as its card says it.
ORIGINS = {
    ExecutionPath.PORTAL: "From the chat",
    ExecutionPath.API: "From the API",
    ExecutionPath.MCP: "From an MCP client",
    ExecutionPath.WORKFLOW: "From a workflow",
    ExecutionPath.DAG: "From a workflow",
    ExecutionPath.DELEGATE: "From another agent",
    ExecutionPath.EVAL: "From an evaluation",
}


@dataclass(frozen=True)
class RequestCard:
    """A request as the pages show it: the model plus what templates cannot compute.

    What people read comes first (the tool's title, the call's business fields, the arguments as
    label / value rows with numbers written for people, the votes); the exact JSON and the tool's
    internal name stay one click away ("Technical details")."""

    request: ConfirmationRequest
    title: str
    arguments: str
    #: the call's arguments as they are now: ``[{"label", "value", "argument"}]``
    argument_rows: list[dict[str, str]]
    #: what the tool's context action said about the call (empty when the arguments describe it)
    about: list[dict[str, str]]
    requester: str
    decider: str | None
    requested_ago: str
    votes: list[selectors.VoteLine] = field(default_factory=list)
    #: The votes against the quorum, for requests needing more than one approval.
    tally: selectors.Tally | None = None
    #: Whether an approver may still change the arguments (the policy allows it, nobody voted).
    editable: bool = False
    proposed: str = ""
    proposed_rows: list[dict[str, str]] = field(default_factory=list)
    editor: str | None = None
    #: A staged request's stages, in order (empty without stages).
    stages: list[selectors.StageLine] = field(default_factory=list)

    @classmethod
    def of(
        cls, request: ConfirmationRequest, *, votes: list[selectors.VoteLine] | None = None
    ) -> RequestCard:
        context = [item for item in request.context or [] if isinstance(item, dict)]
        # Labels the request was opened with (from the tool's parameter schema) name the rows of
        # the arguments as they are now: an approver may have changed them since.
        labels = {
            str(item["argument"]): str(item.get("label", "")) for item in context if item.get("argument")
        }
        order = list(labels) or None  # the schema's order, as the request was opened with it
        # The currency the context gives the call ("1,200.00 USD"): its amounts in the arguments
        # read in it too, so "what will run" does not say less than "about this call".
        currency = _context_currency(context)
        rows = _labelled(presentation.argument_rows(request.tool_args, order=order), labels)
        stages = selectors.stages_of(request=request)
        return cls(
            stages=stages,
            request=request,
            title=request.tool_title or presentation.title_of(request.tool_name),
            arguments=pretty_arguments(request.tool_args),
            argument_rows=_with_currency(rows, request.tool_args, currency),
            about=[item for item in context if not item.get("argument")],
            requester=display_name(request.requested_by),
            decider=display_name(request.responded_by) if request.responded_by_id else None,
            requested_ago=ago(request.created_at),
            votes=selectors.votes_of(request=request) if votes is None else votes,
            tally=selectors.tally_of(request=request) if request.approvals_required > 1 else None,
            editable=request.allow_edit_on_approve and selectors.may_edit_arguments(request=request),
            proposed=pretty_arguments(request.proposed_args) if request.was_edited else "",
            proposed_rows=_with_currency(
                _labelled(presentation.argument_rows(request.proposed_args, order=order), labels),
                request.proposed_args,
                currency,
            )
            if request.was_edited
            else [],
            editor=display_name(request.edited_by) if request.was_edited else None,
        )

    @property
    def summary(self) -> str:
        """What the call is about in one line (:func:`~approvals.presentation.summary_of`)."""
        return presentation.summary_of(self.request.tool_args, self.request.context)

    @property
    def origin(self) -> str:
        """Where the call came from, in words ("From the chat", "From an MCP client")."""
        return ORIGINS.get(self.request.run.execution_path, "")

    @property
    def conversation_title(self) -> str:
        """The conversation's title on one line, cut at a word."""
        return clipped(str(self.request.run.conversation), 60)

    @property
    def tally_line(self) -> str:
        """The quorum's progress with who voted and when ("1 of 2 approvals: april approved
        10:02 UTC — waiting for one more"); empty when one approval is enough."""
        if self.tally is None:
            return ""
        # A staged request's tally counts its current stage's votes only.
        votes = (
            selectors.current_stage_votes(request=self.request, stages=self.stages)
            if self.stages
            else self.votes
        )
        return self.tally.text_with(votes)

    @property
    def reason_text(self) -> str:
        """The request's reason as people read it (a withdrawal says who stopped the run)."""
        return reason_for_people(self.request.reason, request=self.request)

    @property
    def voters(self) -> str:
        """Everyone who voted, with their vote ("april (approved), adam (approved)"); else whoever
        settled the request."""
        if self.votes:
            return ", ".join(f"{vote.by} ({vote.verb})" for vote in self.votes)
        return self.decider or ""


def _labelled(rows: list[dict[str, str]], labels: dict[str, str]) -> list[dict[str, str]]:
    return [{**row, "label": labels.get(row.get("argument", "")) or row["label"]} for row in rows]


_CURRENCY = re.compile(r"[A-Z]{3}")

_WRITTEN_MONEY = re.compile(r"-?[\d.,\s]+\s(?P<currency>[A-Z]{3})")


def _context_currency(context: list[dict[str, Any]]) -> str | None:
    """The currency the call's context names: a "Currency" item, or an amount written with its
    currency ("1,200.00 USD", as :func:`approvals.presentation.answer_rows` writes one). Items that
    are the arguments themselves say nothing the arguments do not."""
    for item in context:
        if item.get("argument"):
            continue
        label, value = str(item.get("label", "")).strip(), str(item.get("value", "")).strip()
        if label.lower() in ("currency", "currency code") and _CURRENCY.fullmatch(value):
            return value
        written = _WRITTEN_MONEY.fullmatch(value)
        if written and presentation.is_money_key(label):
            return written["currency"]
    return None


def _with_currency(rows: list[dict[str, str]], args: Any, currency: str | None) -> list[dict[str, str]]:
    """``rows`` of ``args`` with their amounts written in ``currency`` when they name none."""
    if currency is None or not isinstance(args, dict):
        return rows
    out = []
    for row in rows:
        key = row.get("argument", "")
        value = args.get(key)
        named = _WRITTEN_MONEY.fullmatch(row["value"])  # "1,200.00 EUR": the arguments' own currency
        if presentation.is_money_key(key) and _is_number(value) and not named:
            row = {**row, "value": presentation.money_text(value, currency)}
        out.append(row)
    return out


def _is_number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        return False
    try:
        return Decimal(str(value).strip()).is_finite()
    except InvalidOperation:
        return False


def left_notice(request: ConfirmationRequest, *, viewer: Any) -> str:
    """What an approver's open inbox says in place of ``request``'s card when it leaves their
    inbox: "alice withdrew Pay a purchase (PO-1002).", "april approved …", "… expired: nobody
    decided in time.", or that it no longer waits for them (a stage moved on, a stand-in's part
    was taken back)."""
    title = request.tool_title or presentation.title_of(request.tool_name)
    subject = presentation.subject_of(request.tool_args)
    what = f"{title} ({subject})" if subject else title
    status = request.status
    if status == ConfirmationStatus.CANCELLED:
        who = stopped_by(request.reason, request=request)
        if who is None:
            return f"{what} was withdrawn. {reason_for_people(request.reason, request=request)}"
        if request.requested_by_id and who == display_name(request.requested_by):
            return f"{who} withdrew {what}."
        return f"{who} stopped the run behind {what}."
    if status == ConfirmationStatus.EXPIRED:
        return f"{what} expired: nobody decided in time."
    if status in (ConfirmationStatus.APPROVED, ConfirmationStatus.REJECTED):
        if request.responded_by_id is None:
            return f"{what} was {status}."
        who = "You" if request.responded_by_id == viewer.pk else display_name(request.responded_by)
        return f"{who} {status} {what}."
    if selectors.has_voted(request=request, user=viewer):
        return f"You voted on {what}: it waits for the others' votes."
    return f"{what} no longer waits for you."
