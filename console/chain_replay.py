"""Replaying a proposed hook chain over an agent's recorded calls: which calls' outcomes would change.

An operator picks a chain — the agent's current one, the one it had at a past moment (its
declarations' history), or a hooks file with edits not saved (the YAML ``manage.py hooks export``
writes) — and a window of recorded calls (the last N, a date range, one tool). Each recorded call
is tried as "Try this chain" tries one (:mod:`console.chain_trial`): the chain's hooks on the
arguments the model proposed and, for a call that ran, on the result its tool returned; no tool
runs, no approval request opens, no quota is spent, nothing about the call is recorded. Its
outcome *then* (from the run's events) and *now* are compared:

* ``then``: ``asked`` (an approval was requested, whatever the verdict), ``blocked`` (by a hook or
  the engine), ``rewritten`` (the arguments that ran differ from the proposed ones) or ``allowed``;
* ``now``: ``asked``, ``blocked`` or ``allowed``/``rewritten`` as the proposed chain decides;
* a *change* is a different kind (``allowed → blocked``, ``asked → allowed``, …), or, for a call
  that runs both times, arguments rewritten differently or a result the model would read
  differently. Each change names the hooks it comes from (``by``).

Calls whose tool the agent no longer has, or whose arguments its schema now refuses, are counted
as skipped. :func:`chain_replay_execute` (a Celery task's body) works in batches, saving its
progress after each; the result is kept on the :class:`~agents.models.ChainReplay` and downloadable
as CSV (:func:`replay_csv`).
"""

from __future__ import annotations

import copy
import csv
import datetime as dt
import io
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync
from django.db import transaction
from django.utils import timezone

from agents import events as ev
from agents.checks import hook_chain_of, hooks_declaration
from agents.engine import jsonsafe
from agents.hook_declarations import hooks_parse
from agents.models import Agent, ChainReplay, HookDeclaration, RunEvent, ToolExecution
from agents.tools.schema import argument_errors
from agents.tools.toolbox import ToolboxError, tools_for_agent
from console.chain_trial import (
    NO_RESULT,
    PreparedChain,
    TrialReport,
    gate_reasons_for,
    prepare_chain,
    trial_of,
)
from fimone.errors import ServiceError
from hooks.catalog import HookDeclarationError, resolve_chain

MAX_CALLS = 100_000
"""The most calls one replay reads."""
BATCH = 500
"""Calls tried between two saves of the progress."""
CHANGES_KEPT = 5_000
"""Changed calls kept on a replay (the counts cover them all)."""
CSV_FIELDS = ("run", "tool_call_id", "at", "tool", "then", "now", "change", "by", "detail", "arguments")


# --- the chain to try -----------------------------------------------------------------------------


def chain_current(*, agent: Agent) -> dict[str, Any]:
    """The chain a new run of ``agent`` would keep now."""
    return hook_chain_of(agent)


def chain_as_of(*, agent: Agent, when: dt.datetime) -> dict[str, Any]:
    """The chain a run of ``agent`` started at ``when`` kept: its own declarations and its
    organisation's enforced ones as their history has them then (the agent's model configuration
    and "confirm every call" as they are now). An http hook keeps the secret it has now if its
    address did not change; otherwise the chain says why it cannot be built."""
    rows = HookDeclaration.history.as_of(when).filter(organization_id=agent.organization_id)
    current = {row.pk: row for row in HookDeclaration.objects.filter(organization_id=agent.organization_id)}
    enforced, own = [], []
    for row in rows:
        if row.agent_id not in (None, agent.pk):
            continue
        if row.kind == HookDeclaration.Kind.HTTP:
            now = current.get(row.pk)
            row.secret = (
                now.secret if now is not None and now.secrets_address() == row.secrets_address() else None
            )
        (enforced if row.agent_id is None else own).append(row.as_item())
    return _resolved(agent, enforced=enforced, own=own)


def chain_from_file(*, agent: Agent, text: str, actor: Any) -> dict[str, Any]:
    """The chain ``agent`` would have with the hooks file ``text`` (its own declarations replaced
    by the file's, nothing saved) and its organisation's enforced ones. Raises
    :class:`~agents.hook_declarations.HookFileError` for a file that cannot be read and
    ``ServiceError`` for code hooks ``actor`` may not write."""
    rows = hooks_parse(text=text, filename="hooks file", agent=agent, actor=actor)
    enforced, _own = agent.hook_declaration_items()
    return _resolved(agent, enforced=enforced, own=[row.as_item() for row in rows], config=False)


def _resolved(
    agent: Agent, *, enforced: list[dict[str, Any]], own: list[dict[str, Any]], config: bool = True
) -> dict[str, Any]:
    try:
        return resolve_chain(
            hooks_declaration(agent.model_config_json) if config else None,
            require_confirmation_for_all=agent.require_confirmation_for_all,
            enforced=enforced,
            declared=own,
        )
    except HookDeclarationError as exc:
        return {"v": 1, "error": str(exc)}


# --- starting one ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """Which recorded calls: the ``last`` N (``None``: all, up to :data:`MAX_CALLS`), proposed
    ``since`` / before ``until`` (aware datetimes), of one ``tool`` (``""``: any)."""

    last: int | None = 1_000
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    tool: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "last": self.last,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "tool": self.tool,
        }

    @classmethod
    def of(cls, data: dict[str, Any]) -> Window:
        def when(text: Any) -> dt.datetime | None:
            return dt.datetime.fromisoformat(text) if text else None

        return cls(data.get("last"), when(data.get("since")), when(data.get("until")), data.get("tool") or "")


def check_window(window: Window) -> None:
    """Refuse (``ServiceError`` naming the field) a window that cannot be replayed."""
    if window.last is not None and not 1 <= window.last <= MAX_CALLS:
        raise ServiceError(f"between 1 and {MAX_CALLS:,} calls", field="last")
    if window.since and window.until and window.since >= window.until:
        raise ServiceError("the start of the window is after its end", field="until")


@transaction.atomic
def chain_replay_start(
    *, agent: Agent, actor: Any, chain: dict[str, Any], label: str, window: Window
) -> ChainReplay:
    """A replay of ``chain`` over ``window``'s calls of ``agent``, queued. The caller enqueues
    :func:`chain_replay_execute` for it once committed (``console.tasks.chain_replay_task``).
    A chain that cannot be built is refused (``conflict``), naming why."""
    check_window(window)
    problem = prepare_chain(chain)
    if isinstance(problem, str):
        raise ServiceError(
            f"runs with this chain would fail before any tool call: {problem}", code="conflict"
        )
    return ChainReplay.objects.create(
        organization_id=agent.organization_id,
        agent=agent,
        requested_by=actor,
        chain=chain,
        chain_label=label[:200],
        window=window.as_json(),
    )


# --- the recorded calls ---------------------------------------------------------------------------


@dataclass
class RecordedCall:
    """One call as the record has it: what was proposed and what became of it (module docstring)."""

    run_id: int
    tool_call_id: str
    tool: str
    proposed: dict[str, Any]
    at: dt.datetime
    then: str = "not run"
    blocked_by: str = ""
    ran_args: dict[str, Any] | None = None
    result: Any = NO_RESULT
    observation: str | None = None


def _proposals(agent: Agent, window: Window) -> Any:
    """The ``tool.proposed`` events of ``agent``'s runs in ``window`` (every recorded call)."""
    proposals = RunEvent.objects.filter(run__agent_id=agent.pk, type=ev.TOOL_PROPOSED)
    if window.since:
        proposals = proposals.filter(created_at__gte=window.since)
    if window.until:
        proposals = proposals.filter(created_at__lt=window.until)
    if window.tool:
        proposals = proposals.filter(payload__tool=window.tool)
    return proposals


def recorded_calls(*, agent: Agent, window: Window) -> Iterator[list[RecordedCall]]:
    """The calls of ``window``, newest first, in batches of :data:`BATCH`, each call with its fate."""
    rows = (
        _proposals(agent, window)
        .order_by("-pk")
        .values_list("run_id", "payload", "created_at")[: window.last or MAX_CALLS]
    )
    batch: list[RecordedCall] = []
    for run_id, payload, at in rows.iterator(chunk_size=BATCH):
        arguments = payload.get("arguments")
        batch.append(
            RecordedCall(
                run_id=run_id,
                tool_call_id=str(payload.get("tool_call_id")),
                tool=str(payload.get("tool")),
                proposed=arguments if isinstance(arguments, dict) else {},
                at=at,
            )
        )
        if len(batch) == BATCH:
            yield _with_fates(batch)
            batch = []
    if batch:
        yield _with_fates(batch)


FATES = (ev.TOOL_BLOCKED, ev.TOOL_STARTED, ev.TOOL_FINISHED, ev.APPROVAL_PENDING, ev.APPROVAL_DECIDED)


def _with_fates(calls: list[RecordedCall]) -> list[RecordedCall]:
    by_key = {(c.run_id, c.tool_call_id): c for c in calls}
    run_ids = {c.run_id for c in calls}
    events = RunEvent.objects.filter(run_id__in=run_ids, type__in=FATES).values_list(
        "run_id", "type", "payload"
    )
    seen: dict[tuple[int, str], set[str]] = {}
    for run_id, type_, payload in events:
        key = (run_id, str(payload.get("tool_call_id")))
        call = by_key.get(key)
        if call is None:
            continue
        seen.setdefault(key, set()).add(type_)
        if type_ == ev.TOOL_BLOCKED:
            call.blocked_by = str(payload.get("blocked_by") or "the engine")
        elif type_ == ev.TOOL_STARTED:
            call.ran_args = payload.get("arguments")
        elif type_ == ev.TOOL_FINISHED:
            call.observation = payload.get("observation")
    executions = ToolExecution.objects.filter(run_id__in=run_ids).values_list(
        "run_id", "tool_call_id", "result"
    )
    for run_id, tool_call_id, result in executions:
        call = by_key.get((run_id, tool_call_id))
        if call is not None and result is not None:
            call.result = result
    for key, call in by_key.items():
        kinds = seen.get(key, set())
        # Asked: a person was, or a standing approval answered for one (its verdict is recorded
        # without a pending card) — the chain asked either way.
        if ev.APPROVAL_PENDING in kinds or ev.APPROVAL_DECIDED in kinds:
            call.then = "asked"
        elif ev.TOOL_BLOCKED in kinds:
            call.then = "blocked"
        elif call.ran_args is not None:
            call.then = "rewritten" if call.ran_args != call.proposed else "allowed"
    return calls


# --- trying them ----------------------------------------------------------------------------------

KIND = {"allowed": "allowed", "rewritten": "allowed", "asked": "asked", "blocked": "blocked"}


def _now(report: TrialReport) -> tuple[str, list[str]]:
    """The outcome ``report`` tells and the hooks it comes from."""
    if report.outcome == "blocked":
        return "blocked", [s.row.name for s in report.steps if s.verdict in ("blocked", "failed")][:1]
    if report.outcome == "approval needed":
        asked = [s.row.name for s in report.steps if s.verdict == "asked for approval"]
        return "asked", asked or ["the tool's flag or the agent's setting"]
    rewrote = [s.row.name for s in report.steps if s.verdict == "rewrote arguments"]
    return ("rewritten" if report.final_args != report.tool_args else "allowed"), rewrote


def compare(call: RecordedCall, report: TrialReport) -> dict[str, Any] | None:
    """The change between ``call``'s outcome then and ``report``'s now, or ``None``."""
    now, by = _now(report)
    change, detail = None, ""
    if KIND.get(call.then) != KIND[now]:
        change = f"{KIND.get(call.then, call.then)} → {KIND[now]}"
        if now == "blocked":
            detail = report.detail
        elif call.then == "blocked":
            by, detail = [call.blocked_by], f"{call.blocked_by} blocked it then"
        elif now == "asked":
            reasons = "; ".join(why.text for why in report.reasons)
            detail = f"a person would be asked because {reasons}" if reasons else "a person would be asked"
        elif KIND.get(call.then) == "asked":
            detail = "a person was asked then (or a standing approval answered); nothing asks now"
    elif now in ("allowed", "rewritten") and call.ran_args is not None:
        if report.final_args != call.ran_args:
            change, detail = "arguments rewritten differently", f"then {jsonsafe.text(call.ran_args)}"
        elif (
            report.shows_result
            and call.observation is not None
            and jsonsafe.text(report.final_result) != call.observation
        ):
            by = [s.row.name for s in report.post_steps if s.verdict in ("rewrote result", "failed")]
            change, detail = "result rewritten differently", "the model would read another result"
    if change is None:
        return None
    return {
        "run": call.run_id,
        "tool_call_id": call.tool_call_id,
        "at": f"{call.at:%Y-%m-%d %H:%M:%S}",
        "tool": call.tool,
        "then": call.then if call.then != "blocked" else f"blocked by {call.blocked_by}",
        "now": now,
        "change": change,
        "by": ", ".join(by),
        "detail": detail[:500],
        "arguments": call.proposed,
    }


class _Trier:
    """Tries calls on one prepared chain, with what it needs per tool read once."""

    def __init__(self, agent: Agent, prepared: PreparedChain) -> None:
        self.agent, self.prepared = agent, prepared
        self.read_only = agent.organization.read_only
        try:
            self.tools = tools_for_agent(agent)
        except ToolboxError:
            self.tools = {}
        self.reasons = {
            name: gate_reasons_for(agent, prepared.chain, t.spec) for name, t in self.tools.items()
        }

    def skipped(self, call: RecordedCall) -> str | None:
        tool = self.tools.get(call.tool)
        if tool is None:
            return "tool gone"
        if call.then == "not run" or argument_errors(tool.spec.parameters, call.proposed):
            return "not comparable"
        return None

    async def trials(self, calls: list[RecordedCall]) -> list[TrialReport]:
        reports = []
        for call in calls:
            reports.append(
                await trial_of(
                    self.prepared,
                    agent=self.agent,
                    user_id=None,
                    spec=self.tools[call.tool].spec,
                    tool_args=copy.deepcopy(call.proposed),
                    sample_result=copy.deepcopy(call.result),
                    reasons=self.reasons[call.tool],
                    org_read_only=self.read_only,
                )
            )
        return reports


def chain_replay_execute(*, replay_id: int) -> ChainReplay:
    """Run a queued replay to its end (module docstring), saving progress after each batch. A
    replay that is not queued is left as it is (a task delivered twice does the work once)."""
    claimed = ChainReplay.objects.filter(pk=replay_id, status=ChainReplay.Status.QUEUED).update(
        status=ChainReplay.Status.RUNNING
    )
    replay = ChainReplay.objects.select_related("agent__organization").get(pk=replay_id)
    if not claimed:
        return replay
    try:
        _replay(replay)
    except Exception as exc:  # the replay fails, saying why; the page says so
        replay.status, replay.error = ChainReplay.Status.FAILED, f"{type(exc).__name__}: {exc}"[:1000]
        replay.finished_at = timezone.now()
        replay.save(update_fields=["status", "error", "finished_at"])
        raise
    return replay


def _replay(replay: ChainReplay) -> None:
    agent, window = replay.agent, Window.of(replay.window)
    prepared = prepare_chain(replay.chain)
    if isinstance(prepared, str):
        raise ServiceError(f"the chain cannot be built: {prepared}", code="conflict")
    trier = _Trier(agent, prepared)
    changes: list[dict[str, Any]] = []
    kinds: Counter[str] = Counter()
    hooks: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    tried = 0
    replay.total = _count(agent, window)
    replay.save(update_fields=["total"])
    for batch in recorded_calls(agent=agent, window=window):
        comparable = []
        for call in batch:
            reason = trier.skipped(call)
            if reason is None:
                comparable.append(call)
            else:
                skipped[reason] += 1
        reports = async_to_sync(trier.trials)(comparable)
        for call, report in zip(comparable, reports, strict=True):
            tried += 1
            change = compare(call, report)
            if change is None:
                continue
            kinds[change["change"]] += 1
            for name in change["by"].split(", ") if change["by"] else ["—"]:
                hooks[name] += 1
            if len(changes) < CHANGES_KEPT:
                changes.append(change)
        replay.done += len(batch)
        replay.save(update_fields=["done"])
    replay.changes = changes
    replay.summary = {
        "tried": tried,
        "changed": sum(kinds.values()),
        "kept": len(changes),
        "by_change": dict(kinds.most_common()),
        "by_hook": dict(hooks.most_common()),
        "skipped": dict(skipped),
    }
    replay.status, replay.finished_at = ChainReplay.Status.DONE, timezone.now()
    replay.save(update_fields=["changes", "summary", "status", "finished_at", "done"])


def _count(agent: Agent, window: Window) -> int:
    return min(_proposals(agent, window).count(), window.last or MAX_CALLS)


def replay_csv(replay: ChainReplay) -> str:
    """The replay's changed calls as CSV (:data:`CSV_FIELDS`; arguments as JSON)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_FIELDS)
    writer.writeheader()
    for change in replay.changes:
        writer.writerow({**change, "arguments": jsonsafe.text(change.get("arguments"))})
    return out.getvalue()
