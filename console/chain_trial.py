"""Trying an agent's hook chain on one tool call, without running the tool (a dry run).

The chain tried is the one a new run of the agent would keep (``agents.checks.hook_chain_of``,
rebuilt by ``agents.engine.chain.registry_for_chain`` as the engine rebuilds it), hook by hook in
the order the engine runs them, each through a registry of its own so that timeouts and failing
closed behave as in a run. Nothing is recorded and no approval request is opened:

- PreToolUse hooks run in order on the typed arguments; each one's answer is reported (did not
  apply, allowed, rewrote the arguments, asked for approval, blocked with its message, failed).
  The first block ends the trial, as it ends a call.
- The approval gate is not run: the trial reports whether it *would* ask a human, and why (the
  tool requires confirmation, the agent confirms every call, or a hook asked).
- PostToolUse hooks run on a typed sample result, when one is given.
- A hook in shadow mode is tried as itself and reported as what it would do ("would block
  (shadow)", …); like in a run, that changes nothing for the hooks after it or the outcome.
- Hooks that act outside the chain are **not tried**, and say so: command, python and http hooks
  (they run code of their own that may send or write something), the audit log (it would record
  a call that never happened) and the connector rate limit (it would use up the user's quota).
  The built-in catalog hooks and the read-only guard only compute, and are tried.
"""

from __future__ import annotations

import copy
import inspect
import json
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import async_to_sync

from agents.checks import hook_chain_of
from agents.engine.chain import ChainUnavailable, registry_for_chain
from agents.models import Agent
from agents.tools.schema import argument_errors
from agents.tools.toolbox import ToolboxError, tools_for_agent
from console.hook_editor import CONFIRMS_ALL, ChainRow, Why, chain_rows, describe_conditions, tool_flag_reason
from fimone.storable import unstorable
from hooks import HookContext, HookRegistry
from hooks.catalog import CODE_KINDS
from hooks.contract import Hook, HookPoint
from hooks.shadow import ShadowHook

NO_RESULT: Any = object()
"""``sample_result`` when none was typed: PostToolUse hooks are then not tried."""

TRIED_MODULES = ("hooks.builtin", "agents.guards")
"""Modules whose hooks only compute (or read), so a dry run may run them."""

NOT_TRIED = {
    "audit_log": "it records calls in the call log, and this call never happened",
    "connector_rate_limit": "it counts calls against the user's quota, and a dry run must not use it up",
}
CODE_NOT_TRIED = "command, python and http hooks run code of their own, which may send or write something"


ASKED = "asked for human approval: "
"""How the registry notes a hook's ask in the trace (``hooks.registry``), before its reason."""


class TrialError(ValueError):
    """The trial cannot start (a tool the agent does not have, a toolbox that cannot be built);
    ``str()`` says why in the operator's words."""


@dataclass
class TrialStep:
    """What one hook did: ``verdict`` is one of ``skipped``, ``allowed``, ``rewrote arguments``,
    ``asked for approval``, ``blocked``, ``failed``, ``not tried``, ``rewrote result``,
    ``approval needed``, ``no approval needed``; for a hook in shadow mode, ``would block
    (shadow)``, ``would ask (shadow)``, ``would rewrite (shadow)``, ``would fail (shadow)`` or
    ``would fail closed (shadow)``."""

    row: ChainRow
    verdict: str
    detail: str = ""
    args: dict[str, Any] | None = None
    result: Any = NO_RESULT
    reasons: list[Why] = field(default_factory=list)
    """For the gate: why it would ask (each with where to change it)."""

    @property
    def shows_result(self) -> bool:
        return self.result is not NO_RESULT

    @property
    def args_text(self) -> str:
        return _shown(self.args)

    @property
    def result_text(self) -> str:
        return _shown(self.result)


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@dataclass
class TrialReport:
    """The outcome of a trial: ``outcome`` is ``allowed``, ``approval needed``, ``blocked`` or
    ``cannot run`` (``detail`` says why; for ``approval needed``, ``reasons`` too, each with where
    it is changed); ``final_args`` are what the tool would receive."""

    tool_name: str
    tool_args: dict[str, Any]
    outcome: str
    detail: str = ""
    tool_title: str = ""
    """The tool as people read it (its title, else its name made readable)."""
    final_args: dict[str, Any] | None = None
    steps: list[TrialStep] = field(default_factory=list)
    post_steps: list[TrialStep] = field(default_factory=list)
    final_result: Any = NO_RESULT
    reasons: list[Why] = field(default_factory=list)

    @property
    def shows_result(self) -> bool:
        return self.final_result is not NO_RESULT

    @property
    def final_args_text(self) -> str:
        return _shown(self.final_args)

    @property
    def final_result_text(self) -> str:
        return _shown(self.final_result)


def agent_tool_specs(agent: Agent) -> dict[str, Any]:
    """The specs (name, title, parameters' schema) of the tools the agent's runs may call, by
    name (empty when its toolbox cannot be built)."""
    try:
        return {name: tool.spec for name, tool in tools_for_agent(agent).items()}
    except ToolboxError:
        return {}


def tool_choices(tools: dict[str, Any]) -> list[tuple[str, str]]:
    """A picker's choices for ``tools`` (:func:`agent_tool_specs`): each tool by its title, as
    people read it; the internal name is added only where two tools share a title, to tell them
    apart."""
    titles = [spec.display for spec in tools.values()]
    return [
        (name, spec.display if titles.count(spec.display) == 1 else f"{spec.display} ({name})")
        for name, spec in tools.items()
    ]


def _inner(hook: Hook) -> Hook:
    while hasattr(hook, "inner"):
        hook = hook.inner
    return hook


def _why_not_tried(hook: Hook, row: ChainRow) -> str | None:
    if row.kind in CODE_KINDS:
        return CODE_NOT_TRIED
    if row.name in NOT_TRIED:
        return NOT_TRIED[row.name]
    module = type(_inner(hook)).__module__
    if row.source == "system" or module in TRIED_MODULES:
        return None
    return f"it comes from {module}, which is not known to be free of side effects"


async def _applies(hook: Hook, ctx: HookContext) -> bool:
    answer = hook.should_trigger(ctx)
    if inspect.isawaitable(answer):
        answer = await answer
    return bool(answer)


def _effects(outcome: Any) -> str:
    return "; ".join(effect.message for effect in outcome.side_effects)


def _context(ctx: HookContext, **changes: Any) -> HookContext:
    fields = {name: getattr(ctx, name) for name in HookContext.__dataclass_fields__}
    fields.update(changes)
    fields["metadata"] = dict(ctx.metadata)
    return HookContext(**fields)


async def _try_pre(
    report: TrialReport, pairs: list[tuple[Hook, ChainRow]], ctx: HookContext, reasons: list[Why]
) -> None:
    """``reasons``: why the gate asks whatever the hooks do (the tool's flag, the agent's setting)."""
    meta = ctx.metadata
    needed = bool(meta.get("requires_confirmation") or meta.get("require_confirmation_for_all"))
    args = ctx.tool_args
    for hook, row in pairs:
        here = _context(ctx, tool_args=copy.deepcopy(args), requires_confirmation=needed)
        if row.is_gate:
            if await _applies(hook, here):
                detail = "; ".join(str(r) for r in reasons)
                report.steps.append(TrialStep(row, "approval needed", detail, reasons=list(reasons)))
            else:
                report.steps.append(TrialStep(row, "no approval needed", "nothing asks for a human"))
            continue
        shadow = isinstance(hook, ShadowHook)
        if shadow:  # tried as itself; what it would do is reported and changes nothing (below)
            hook = hook.inner
        try:
            applies = await _applies(hook, here)
        except Exception as exc:  # the registry would fail closed on it: let it say how
            applies, problem = True, exc
        else:
            problem = None
        if not applies:
            report.steps.append(TrialStep(row, "skipped", "does not apply to this call"))
            continue
        why_not = None if problem is not None else _why_not_tried(hook, row)
        if why_not is not None:
            report.steps.append(TrialStep(row, "not tried", f"Not run in a dry run: {why_not}."))
            continue
        outcome = await HookRegistry([hook]).run_pre_tool_use(here)
        failed = [e.message for e in outcome.side_effects if e.failure]
        if shadow:
            report.steps.append(_shadow_step(row, outcome, failed, args))
            continue
        if outcome.suspension is not None:
            report.steps.append(TrialStep(row, "blocked", f"would wait: {outcome.suspension.reason}"))
            report.outcome, report.detail = "blocked", f"{row.name} would make the call wait"
            return
        if not outcome.allow:
            verdict = "failed" if failed else "blocked"
            report.steps.append(TrialStep(row, verdict, outcome.error or "", args=outcome.tool_args))
            report.outcome, report.detail = "blocked", f"blocked by {row.name}: {outcome.error}"
            report.final_args = outcome.tool_args
            return
        if failed:
            report.steps.append(
                TrialStep(row, "failed", f"{'; '.join(failed)} (on error: allow, so the call goes on)")
            )
            continue
        if outcome.confirmation_requested_by:
            needed = True
            asked = [e.message for e in outcome.side_effects if e.message.startswith(ASKED)]
            why = "; ".join(m[len(ASKED) :] for m in asked) or "its conditions are met"
            conditions = describe_conditions(row.params)
            if conditions and why.startswith(f"{ctx.tool_name} arguments meet "):
                why = conditions  # the hook's own wording of its conditions, without the tool
            elif conditions and conditions not in why:
                why = f"{conditions} ({why})"
            reasons.append(Why(f"{row.name} asked: {why}"))
            verdict, detail = "asked for approval", _effects(outcome)
        elif outcome.tool_args != args:
            verdict, detail = "rewrote arguments", _effects(outcome)
        else:
            verdict, detail = "allowed", _effects(outcome)
        rewritten = outcome.tool_args if outcome.tool_args != args else None
        report.steps.append(TrialStep(row, verdict, detail, args=rewritten))
        args = outcome.tool_args
    report.final_args = args
    if needed:
        report.outcome, report.detail = "approval needed", "; ".join(str(r) for r in reasons)
        report.reasons = list(reasons)
    else:
        report.outcome, report.detail = "allowed", "the tool would run without asking anyone"


SHADOW_NOTE = "in shadow: the call goes on as if this hook were absent"


def _shadow_step(row: ChainRow, outcome: Any, failed: list[str], args: dict[str, Any]) -> TrialStep:
    """What a hook in shadow mode would have done with the call: reported, never applied."""
    if outcome.suspension is not None:
        return TrialStep(row, "would ask (shadow)", f"{outcome.suspension.reason}; {SHADOW_NOTE}")
    if not outcome.allow:
        verdict = "would fail closed (shadow)" if failed else "would block (shadow)"
        return TrialStep(row, verdict, f"{outcome.error}; {SHADOW_NOTE}")
    if failed:
        return TrialStep(row, "would fail (shadow)", f"{'; '.join(failed)}; {SHADOW_NOTE}")
    if outcome.confirmation_requested_by:
        return TrialStep(row, "would ask (shadow)", f"{_effects(outcome)}; {SHADOW_NOTE}")
    if outcome.tool_args != args:
        return TrialStep(row, "would rewrite (shadow)", SHADOW_NOTE, args=outcome.tool_args)
    return TrialStep(row, "allowed", _effects(outcome) or "nothing to change (in shadow)")


async def _try_post(
    report: TrialReport, pairs: list[tuple[Hook, ChainRow]], ctx: HookContext, result: Any
) -> None:
    for hook, row in pairs:
        here = _context(ctx, tool_args=copy.deepcopy(report.final_args or {}), tool_result=result)
        shadow = isinstance(hook, ShadowHook)
        if shadow:
            hook = hook.inner
        try:
            applies = await _applies(hook, here)
        except Exception:
            applies = True
        if not applies:
            report.post_steps.append(TrialStep(row, "skipped", "does not apply to this call"))
            continue
        why_not = _why_not_tried(hook, row)
        if why_not is not None:
            report.post_steps.append(TrialStep(row, "not tried", f"Not run in a dry run: {why_not}."))
            continue
        outcome = await HookRegistry([hook]).run_post_tool_use(here)
        if shadow:
            if outcome.failed_hooks:
                verdict, detail = "would fail closed (shadow)", f"{_effects(outcome)}; {SHADOW_NOTE}"
            elif outcome.result != result:
                verdict, detail = "would rewrite (shadow)", SHADOW_NOTE
            else:
                verdict, detail = "allowed", _effects(outcome) or "nothing to change (in shadow)"
            shown = outcome.result if outcome.result != result else NO_RESULT
            report.post_steps.append(TrialStep(row, verdict, detail, result=shown))
            continue
        if outcome.failed_hooks:
            report.post_steps.append(TrialStep(row, "failed", _effects(outcome), result=outcome.result))
        elif outcome.result != result:
            report.post_steps.append(
                TrialStep(row, "rewrote result", _effects(outcome), result=outcome.result)
            )
        else:
            report.post_steps.append(TrialStep(row, "allowed", _effects(outcome) or "result unchanged"))
        result = outcome.result
    report.final_result = result


def _pairs(registry: HookRegistry, rows: list[ChainRow], point: HookPoint) -> list[tuple[Hook, ChainRow]]:
    hooks = [h for h in registry.hooks if h.point is point]
    mine = [r for r in rows if r.point == str(point)]
    if len(hooks) != len(mine):  # the panel and the registry disagree: never guess which is which
        raise ChainUnavailable("the chain's hooks could not be matched to the chain's record")
    return list(zip(hooks, mine, strict=True))


@dataclass(frozen=True)
class PreparedChain:
    """A recorded chain made ready to try: its registry's hooks paired with the rows that show
    them, per point (built once, tried on any number of calls)."""

    chain: dict[str, Any]
    pre: list[tuple[Hook, ChainRow]]
    post: list[tuple[Hook, ChainRow]]


def prepare_chain(chain: dict[str, Any]) -> PreparedChain | str:
    """``chain`` (``agents.checks.hook_chain_of``'s record) ready to try, or why runs keeping it
    would fail before any tool call."""
    if "error" in chain:
        return str(chain["error"])
    try:
        registry = registry_for_chain(chain)
        rows = chain_rows(chain)
        pre = _pairs(registry, rows, HookPoint.PRE_TOOL_USE)
        post = _pairs(registry, rows, HookPoint.POST_TOOL_USE)
    except ChainUnavailable as exc:
        return str(exc)
    return PreparedChain(chain=chain, pre=pre, post=post)


def gate_reasons_for(agent: Agent, chain: dict[str, Any], spec: Any) -> list[Why]:
    """Why the gate asks for a call of the tool ``spec`` whatever the hooks do: the tool's flag,
    the agent confirming every call."""
    reasons: list[Why] = []
    if spec.requires_confirmation:
        reasons.append(tool_flag_reason(agent, spec.name))
    if chain.get("require_confirmation_for_all"):
        reasons.append(CONFIRMS_ALL)
    return reasons


async def trial_of(
    prepared: PreparedChain,
    *,
    agent: Agent,
    user_id: int | None,
    spec: Any,
    tool_args: Any,
    sample_result: Any = NO_RESULT,
    reasons: list[Why],
    org_read_only: bool,
) -> TrialReport:
    """What ``prepared`` does with one call of the tool ``spec`` (arguments already checked against
    its schema), dry (module docstring). ``reasons``: :func:`gate_reasons_for`'s (copied here);
    ``org_read_only``: whether the agent's organisation is read-only (read by the caller: this
    runs on the event loop, which reads no database)."""
    tool_name = spec.name
    report = TrialReport(
        tool_name=tool_name,
        tool_args=tool_args,
        outcome="cannot run",
        tool_title=spec.display,
    )
    ctx = HookContext(
        tool_name=tool_name,
        tool_args=tool_args,
        tool_schema=spec.parameters,
        agent_id=agent.pk,
        user_id=user_id,
        metadata={
            "org_id": agent.organization_id,
            "org_read_only": org_read_only,
            "conversation_id": None,
            "run_id": None,
            "execution_path": "trial",
            "require_confirmation_for_all": bool(prepared.chain.get("require_confirmation_for_all")),
            "tool_call_id": "trial",
            "requires_confirmation": bool(spec.requires_confirmation),
            "is_write": spec.is_write,
        },
    )
    await _try_pre(report, prepared.pre, ctx, list(reasons))
    if sample_result is not NO_RESULT and report.outcome != "blocked":
        await _try_post(report, prepared.post, ctx, sample_result)
    return report


def chain_trial(
    *,
    agent: Agent,
    user: Any,
    tool_name: str,
    tool_args: Any,
    sample_result: Any = NO_RESULT,
) -> TrialReport:
    """Try ``agent``'s current chain on a call of ``tool_name`` with ``tool_args`` (and its
    PostToolUse hooks on ``sample_result``), as ``user``. Raises :class:`TrialError` for a tool
    the agent does not have; every other problem is the report's ``cannot run`` outcome.

    Precondition: the caller checked that ``user`` operates the agent's organisation."""
    try:
        tools = tools_for_agent(agent)
    except ToolboxError as exc:
        raise TrialError(f"The agent's tools cannot be built: {exc}") from None
    tool = tools.get(tool_name)
    if tool is None:
        raise TrialError(f"{tool_name!r} is not one of this agent's tools ({', '.join(tools) or 'none'}).")
    report = TrialReport(
        tool_name=tool_name,
        tool_args=tool_args,
        outcome="cannot run",
        tool_title=tool.spec.display,
    )
    # As the engine refuses them (agents.engine.pipeline): a value no database stores first.
    unfit = unstorable(tool_args, name="the arguments") if isinstance(tool_args, dict) else None
    problems = [unfit] if unfit is not None else argument_errors(tool.spec.parameters, tool_args)
    if problems:
        report.detail = "the engine refuses these arguments before any hook: " + "; ".join(problems[:5])
        return report
    chain = hook_chain_of(agent)
    prepared = prepare_chain(chain)
    if isinstance(prepared, str):
        report.detail = f"runs of this agent fail before any tool call: {prepared}"
        return report
    reasons = gate_reasons_for(agent, chain, tool.spec)
    return async_to_sync(trial_of)(
        prepared,
        agent=agent,
        user_id=getattr(user, "pk", None),
        spec=tool.spec,
        tool_args=tool_args,
        sample_result=sample_result,
        reasons=reasons,
        org_read_only=agent.organization.read_only,
    )
