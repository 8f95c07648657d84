"""The DAG engine (``Agent.engine = "dag"``): plan, run the steps as child runs, synthesise.

1. A planner LLM call returns a plan: ``{"steps": [{"id", "task", "depends_on": [ids]}]}``. It is
   validated (shape, duplicate or unknown ids, cycles, at most ``DAG_MAX_STEPS`` steps); a bad plan
   gets one re-plan with the reason, then the run fails clearly (stage ``plan``).
2. Each step runs as a child :class:`~agents.models.Run` of the same agent
   (``execution_path="dag"``, ``parent_run``) keeping the parent's recorded hook chain, driven by
   the ReAct engine: every tool call of every step goes through the tool-call pipeline and its
   hooks (docs/design.md §1.2). Steps whose dependencies are done run concurrently; a step receives the
   results of the steps it depends on in its input.
3. A step that waits for an approval parks its own run; the other steps go on. When nothing more
   can run, the DAG run parks too. The step's verdict resumes the step's run, whose ending wakes
   this run (:mod:`agents.engine.runner`), which continues where it was: finished steps are never
   run again (their states live in the checkpoint).
4. A synthesis LLM call answers from the steps' results.

Checkpoint (besides the journal's keys): ``"messages"`` (the conversation: history, the user's
input, the final answer) and ``"dag": {"attempts": n, "plan": [steps] | null, "steps": {id:
{"status": "pending"|"running"|"waiting"|"done"|"failed", "run_id", "output", "error"}}}``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from django.conf import settings

from agents import events as ev
from agents.engine import child_driver, child_runs
from agents.engine.base import RunEngine, RunFailed
from agents.engine.db import db
from agents.engine.delegation import delegates_of
from agents.llm.base import LLMProvider
from agents.models import ExecutionPath, RunStatus
from agents.tools.base import Tool

PLAN_REQUEST = "Plan this task: "
REPLAN_REQUEST = "The plan was rejected: {error}. Reply with a corrected plan, as JSON only."
SYNTHESIS_REQUEST = "Synthesise the final answer to: "

PLANNER_RULES = (
    "You plan how to carry out the user's task as steps that workers run with these tools: "
    "{tools}. Reply with JSON only: "
    '{{"steps": [{{"id": "a", "task": "…", "depends_on": []}}]}}. Each task is self-contained; '
    "a step receives the results of the steps it depends on. Steps that do not depend on each "
    "other run at the same time. At most {max_steps} steps."
)
SYNTHESIS_RULES = "Answer the user's task from the results of its steps, plainly and completely."


class PlanError(ValueError):
    """The planner's answer is not a usable plan; ``str()`` says why (the planner is told)."""


def plan_parse(text: str, *, max_steps: int) -> list[dict[str, Any]]:
    """The steps of a planner's answer (JSON, possibly fenced), in a dependency-respecting order,
    or :class:`PlanError`."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise PlanError("the answer holds no JSON object")
    try:
        data = json.loads(text[start : end + 1])
    except ValueError:
        raise PlanError("the answer is not valid JSON") from None
    steps = data.get("steps") if isinstance(data, dict) else None
    if not isinstance(steps, list) or not steps:
        raise PlanError('the plan needs a non-empty "steps" list')
    if len(steps) > max_steps:
        raise PlanError(f"the plan has {len(steps)} steps; at most {max_steps} are allowed")
    plan: list[dict[str, Any]] = []
    for n, step in enumerate(steps):
        if not isinstance(step, dict):
            raise PlanError(f"step {n} is not an object")
        step_id, task, depends_on = step.get("id"), step.get("task"), step.get("depends_on", [])
        if not isinstance(step_id, str) or not step_id.strip() or len(step_id) > 40:
            raise PlanError(f"step {n} needs an id (a short string)")
        if not isinstance(task, str) or not task.strip():
            raise PlanError(f"step {step_id!r} needs a task")
        if not isinstance(depends_on, list) or not all(isinstance(d, str) for d in depends_on):
            raise PlanError(f"step {step_id!r}: depends_on must be a list of step ids")
        plan.append({"id": step_id, "task": task.strip(), "depends_on": list(dict.fromkeys(depends_on))})
    ids = [step["id"] for step in plan]
    if len(set(ids)) != len(ids):
        raise PlanError("two steps have the same id")
    for step in plan:
        unknown = [d for d in step["depends_on"] if d not in ids]
        if unknown:
            raise PlanError(f"step {step['id']!r} depends on unknown steps: {', '.join(unknown)}")
    ordered: list[dict[str, Any]] = []
    placed: set[str] = set()
    remaining = list(plan)
    while remaining:
        ready = [s for s in remaining if all(d in placed for d in s["depends_on"])]
        if not ready:
            cycle = ", ".join(s["id"] for s in remaining)
            raise PlanError(f"the steps {cycle} depend on each other in a cycle")
        ordered.extend(ready)
        placed.update(s["id"] for s in ready)
        remaining = [s for s in remaining if s["id"] not in placed]
    return ordered


class DagEngine(RunEngine):
    """Drives one DAG run. Precondition: ``owner`` holds the run's lease (``store.run_claim``).

    ``provider_factory`` and ``tools_factory`` are passed on to the steps' engines.
    """

    crash_label = "DAG run"

    @property
    def state(self) -> dict[str, Any]:
        return self.checkpoint["dag"]

    def _fresh_state(self) -> dict[str, Any]:
        return {"dag": {"attempts": 0, "plan": None, "steps": {}}}

    async def _prepare(self) -> tuple[LLMProvider, dict[str, Tool]]:
        """What the run needs before it plans, or :class:`RunFailed` (fail closed): a chain that
        cannot be built stops the run before any step (and so any tool) runs."""
        essentials = await self._essentials()
        self.chain = essentials.chain
        self.delegates = list(await db(delegates_of, agent=self.run.agent))
        return essentials.provider, essentials.tools

    async def _drive(self) -> str:
        provider, tools = await self._prepare()
        if self.state["plan"] is None:
            await self._plan(provider, tools)
        waiting = await self._run_steps()
        if waiting:
            return await self._park(waiting)
        answer = await self._synthesise(provider)
        self.checkpoint["messages"].append({"role": "assistant", "content": answer})
        return await self.journal.finish(RunStatus.COMPLETED, output=answer)

    # --- planning ---------------------------------------------------------------------------------

    async def _ask(self, provider: LLMProvider, system: str, conversation: list[dict[str, Any]]) -> str:
        response = await self._complete(
            provider, messages=[{"role": "system", "content": system}, *conversation], tools=[]
        )
        return response.content or ""

    def _tool_names(self, tools: dict[str, Tool]) -> str:
        names = list(tools)
        if self.delegates:  # the steps may ask these agents (call_agent)
            names.append(f"call_agent (agents: {', '.join(self.delegates)})")
        return ", ".join(names) or "none"

    async def _plan(self, provider: LLMProvider, tools: dict[str, Tool]) -> None:
        """Ask for a plan; one re-plan if it is unusable, then fail the run clearly."""
        journal, state = self.journal, self.state
        max_steps = settings.DAG_MAX_STEPS
        system = "\n\n".join(
            part
            for part in (
                self.run.agent.instructions.strip(),
                PLANNER_RULES.format(tools=self._tool_names(tools), max_steps=max_steps),
            )
            if part
        )
        history = self.checkpoint["messages"][:-1]
        conversation = [*history, {"role": "user", "content": PLAN_REQUEST + self.run.input}]
        error = ""
        for attempt in (1, 2):
            state["attempts"] = attempt
            answer = await self._ask(provider, system, conversation)
            journal.emit(ev.LLM_MESSAGE, {"content": answer, "tool_calls": [], "iteration": attempt})
            try:
                plan = plan_parse(answer, max_steps=max_steps)
            except PlanError as exc:
                error = str(exc)
                journal.emit(ev.DAG_PLAN_REJECTED, {"error": error, "attempt": attempt})
                conversation += [
                    {"role": "assistant", "content": answer},
                    {"role": "user", "content": REPLAN_REQUEST.format(error=error)},
                ]
                continue
            state["plan"] = plan
            state["steps"] = {
                s["id"]: {"status": "pending", "run_id": None, "output": "", "error": ""} for s in plan
            }
            journal.emit(ev.DAG_PLANNED, {"steps": plan, "attempt": attempt})
            await journal.save()
            return
        raise RunFailed(f"the planner gave no usable plan after one re-plan: {error}", "plan")

    # --- steps ------------------------------------------------------------------------------------

    def _step_input(self, step: dict[str, Any]) -> str:
        steps = self.state["steps"]
        tasks = {s["id"]: s["task"] for s in self.state["plan"]}
        if not step["depends_on"]:
            return step["task"]
        results = "\n".join(f"- {d} ({tasks[d]}): {steps[d]['output']}" for d in step["depends_on"])
        return f"{step['task']}\n\nResults of the steps this one depends on:\n{results}"

    async def _run_steps(self) -> list[str]:
        """Run every step that can run, each as soon as its dependencies are done, concurrently.
        Returns the ids of steps still waiting (for an approval), or raises :class:`RunFailed`
        once the running steps ended if one failed."""
        steps = self.state["steps"]
        running: dict[asyncio.Task[Any], str] = {}
        for step_id, step in steps.items():
            if step["status"] in ("running", "waiting"):
                # Started earlier: ended meanwhile (the verdict came), or to continue (a crash).
                child = await db(child_runs.child_state, run_id=step["run_id"])
                await self._settle(step_id, child, driven=False)
        while True:
            failed = [i for i, s in steps.items() if s["status"] == "failed"]
            if not failed:
                for step in self.state["plan"]:
                    state = steps[step["id"]]
                    ready = all(steps[d]["status"] == "done" for d in step["depends_on"])
                    if (
                        state["status"] in ("pending", "running")
                        and ready
                        and step["id"] not in running.values()
                    ):
                        running[asyncio.create_task(self._step(step))] = step["id"]
            if not running:
                break
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                step_id = running.pop(task)
                await self._settle(step_id, task.result(), driven=True)
            await self.journal.save()
        if failed:
            first = steps[failed[0]]
            raise RunFailed(f"step {failed[0]!r} failed: {first['error'] or 'no reason given'}", "steps")
        return [i for i, s in steps.items() if s["status"] == "waiting"]

    async def _step(self, step: dict[str, Any]) -> child_runs.ChildState:
        """Open the step's child run (the same one if it was opened before) and drive it."""
        state = self.state["steps"][step["id"]]
        if state["run_id"] is None:
            child = await db(
                child_runs.child_run_open,
                parent_id=self.run_id,
                call_id=f"step:{step['id']}",
                agent_id=self.run.agent_id,
                input=self._step_input(step),
                execution_path=ExecutionPath.DAG,
                hook_chain=self.chain,
                own_conversation=False,
            )
            state["run_id"], state["status"] = child.run_id, "running"
            self.journal.emit(ev.DAG_STEP_STARTED, {"step": step["id"], "run_id": child.run_id})
            await self.journal.save()
        await child_driver.child_drive(
            state["run_id"], provider_factory=self.provider_factory, tools_factory=self.tools_factory
        )
        return await db(child_runs.child_state, run_id=state["run_id"])

    async def _settle(self, step_id: str, child: child_runs.ChildState, *, driven: bool) -> None:
        """Record what the step's run has come to. ``driven``: we just tried to drive it."""
        state = self.state["steps"][step_id]
        before = state["status"]
        if child.status == RunStatus.COMPLETED:
            state.update(status="done", output=child.output)
        elif child.status in (RunStatus.FAILED, RunStatus.CANCELLED):
            state.update(status="failed", error=child.error or child.status)
        elif child.status == RunStatus.QUEUED or (child.status == RunStatus.RUNNING and not driven):
            # Opened but never driven, or left running by a worker that died with this run:
            # the scheduler drives it (a claim takes it only once its lease expired).
            state["status"] = "running"
            return
        else:  # parked on an approval, or driven by another process: its ending wakes us
            state["status"] = "waiting"
        if state["status"] != before:
            self.journal.emit(
                ev.DAG_STEP_FINISHED,
                {
                    "step": step_id,
                    "run_id": child.run_id,
                    "status": state["status"],
                    "output": state["output"],
                    "error": state["error"],
                },
            )
        self.journal.checkpoint_changed()

    async def _park(self, waiting: list[str]) -> str:
        run_ids = [self.state["steps"][i]["run_id"] for i in waiting]
        await self.journal.relay_approvals(child_run_ids=run_ids)

        async def still_waiting() -> bool:
            return await db(child_runs.children_all_unfinished, run_ids=run_ids)

        return await self.journal.park(
            tool_call_id=f"step:{waiting[0]}",
            tool="dag_step",
            reason=f"step {', '.join(waiting)} waits for an answer",
            detail={"steps": waiting, "run_ids": run_ids},
            still_waiting=still_waiting,
        )

    # --- synthesis --------------------------------------------------------------------------------

    async def _synthesise(self, provider: LLMProvider) -> str:
        steps = self.state["steps"]
        results = "\n".join(
            f"[{s['id']}] {s['task']}: {steps[s['id']]['output']}" for s in self.state["plan"]
        )
        system = "\n\n".join(p for p in (self.run.agent.instructions.strip(), SYNTHESIS_RULES) if p)
        history = self.checkpoint["messages"][:-1]
        request = f"{SYNTHESIS_REQUEST}{self.run.input}\n\nResults of the steps:\n{results}"
        answer = await self._ask(provider, system, [*history, {"role": "user", "content": request}])
        self.journal.emit(ev.LLM_MESSAGE, {"content": answer, "tool_calls": [], "iteration": 0})
        return answer
