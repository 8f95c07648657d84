"""What the run engines share — the agent's (ReAct, DAG) and those higher apps register for their
runs (a workflow's CONNECTOR node): a run's life around its drive, what it needs before its first
step, and how it calls the model.

:meth:`RunEngine.execute` opens the run through its :class:`~agents.engine.journal.RunJournal`,
starts it (a fresh checkpoint and ``run_started``) or resumes it (``run_resumed``), beats its
lease while the engine's ``_drive`` runs, and turns however the drive ends into the run's ending:
:class:`RunFailed` fails it at its stage, a lost lease leaves it to the lease's new holder, any
other exception fails it as an internal error (logged). Everything else is the engine's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from agents import events as ev
from agents.engine import batch, store
from agents.engine import chain as chains
from agents.engine.db import db
from agents.engine.journal import RunJournal
from agents.llm.base import DeltaCallback, LLMError, LLMProvider, LLMResponse
from agents.llm.factory import provider_for
from agents.models import Run, RunStatus
from agents.tools.base import Tool
from agents.tools.sandbox import sandbox_note, sandboxed_tools
from agents.tools.toolbox import ToolboxError, tools_for_agent
from fimone import telemetry
from hooks import HookRegistry

log = logging.getLogger(__name__)


class RunFailed(Exception):
    """The run cannot go on; it ends failed with ``error`` at ``stage``."""

    def __init__(self, error: str, stage: str) -> None:
        super().__init__(error)
        self.error, self.stage = error, stage


@dataclass(frozen=True)
class Essentials:
    """What every run needs before its first step: the hook chain it keeps and the registry
    rebuilt from it, the agent's model and the agent's own tools."""

    chain: dict[str, Any]
    registry: HookRegistry
    provider: LLMProvider
    tools: dict[str, Tool]


class RunEngine(ABC):
    """Drives one run. Precondition: ``owner`` holds the run's lease (``store.run_claim``).

    An engine adds the keys of its own to a fresh checkpoint (:meth:`_fresh_state`, besides
    ``"v"`` and ``"messages"``: by default the history, then the user's input, see
    :meth:`_fresh_messages`) and drives the run (:meth:`_drive`) to its ending (the journal's
    ``finish`` or ``park``), returning its status.
    """

    #: How the log names a run of this engine that crashed.
    crash_label = "run"
    #: Whose hooks a chain that cannot be built is said to be, on the failed run.
    chain_owner = "agent"
    #: The run, once :meth:`execute` opened it.
    run: Run
    #: Whether :meth:`execute` started the run (a fresh checkpoint) rather than resumed it.
    started_here: bool

    def __init__(
        self,
        run_id: int,
        *,
        owner: str,
        provider_factory: Callable[[dict[str, Any]], LLMProvider] = provider_for,
        tools_factory: Callable[[Any], dict[str, Tool]] | None = None,
    ) -> None:
        self.run_id = run_id
        self.owner = owner
        self.provider_factory = provider_factory
        self.tools_factory = tools_factory
        self.journal = RunJournal(run_id, owner=owner)
        self.journal.on_ended = self._ended

    @property
    def checkpoint(self) -> dict[str, Any]:
        assert self.journal.checkpoint is not None
        return self.journal.checkpoint

    async def execute(
        self, *, resumed_reason: str | None = None, opening: store.Opening | None = None
    ) -> str:
        """Drive the run until it completes, fails or parks; return its final status.
        ``opening``: the run as its creator has it (``store.opening_of_new_run``), not read again."""
        journal = self.journal
        run = await journal.open(opening)
        self.run = run
        await self._opened()
        self.started_here = journal.checkpoint is None
        if not self.started_here:
            if resumed_reason is not None:
                journal.emit(ev.RUN_RESUMED, {"reason": resumed_reason})
        else:
            journal.checkpoint = {"v": 1, "messages": await self._fresh_messages(), **self._fresh_state()}
            journal.emit(
                ev.RUN_STARTED,
                {"agent_id": run.agent_id, "execution_path": run.execution_path, "input": run.input},
            )
        heartbeat = asyncio.create_task(journal.heartbeat())
        try:
            with self._traced_drive() as span:
                status = await self._drive_to_an_end()
                if span is not None:
                    span.set_attribute("fim.run.status", status)
                self._ended(status)
                return status
        finally:
            heartbeat.cancel()
            await journal.flush_stream()  # the run's last events reach the stream before it returns
            await journal.close()

    @contextlib.contextmanager
    def _traced_drive(self) -> Iterator[Any]:
        """The drive's span (:mod:`fimone.telemetry`): a run's first drive continues the current
        context (the request or task that drives it) and stores its own in the checkpoint; a
        resumed drive continues that one, wherever it runs."""
        if not telemetry.ENABLED:
            yield None
            return
        run = self.run
        stored = self.checkpoint.get("trace", "")
        attributes = {
            "fim.run.id": run.pk,
            "fim.agent.id": run.agent_id,
            "fim.run.execution_path": run.execution_path,
            "fim.run.resumed": not self.started_here,
        }
        with telemetry.span("fim.run", attributes=attributes, parent=stored, link_current=True) as span:
            if not stored:
                self.checkpoint["trace"] = telemetry.traceparent()
                self.journal.checkpoint_changed()
            yield span

    async def _drive_to_an_end(self) -> str:
        """:meth:`_drive`, every way it can end turned into the run's ending."""
        journal = self.journal
        try:
            return await self._drive()
        except RunFailed as failure:
            return await journal.finish(RunStatus.FAILED, error=failure.error, stage=failure.stage)
        except batch.LeaseLost:
            return await journal.after_lease_lost()
        except Exception as exc:
            log.exception("%s %s crashed", self.crash_label, self.run_id)
            return await journal.finish(
                RunStatus.FAILED, error=f"internal error: {type(exc).__name__}", stage="engine"
            )

    def _ended(self, status: str) -> None:
        """The run's ending (or parking) is written; its stream is yet to be flushed (a caller
        waiting for the outcome need not wait for that). Told by the journal as soon as a
        finished run's ending is written (before higher apps hear ``run_settled``), and again
        once the drive returned, whatever it ended in: once is all an override may act on.
        Nothing by default."""
        return None

    async def _opened(self) -> None:
        """Read what the engine needs besides the run, once it is open and before it starts or
        resumes (outside the run's endings: what fails here fails :meth:`execute`)."""
        return None  # nothing besides the run, unless an engine says otherwise

    async def _fresh_messages(self) -> list[dict[str, Any]]:
        """A fresh checkpoint's ``"messages"``: the conversation so far, then the user's input."""
        history = await db(store.previous_messages, run=self.run)
        return [*history, {"role": "user", "content": self.run.input}]

    @abstractmethod
    def _fresh_state(self) -> dict[str, Any]:
        """The engine's own keys of a fresh checkpoint."""

    @abstractmethod
    async def _drive(self) -> str:
        """Drive the opened run to its ending; return its status."""

    async def _hooks(self) -> tuple[dict[str, Any], HookRegistry]:
        """The chain the run keeps and the registry rebuilt from it, or :class:`RunFailed` (fail
        closed): an archived agent or a chain that cannot be built stop the run before any tool
        runs."""
        run = self.run
        archived = run.agent.archived_reason()
        if archived is not None:
            # Archiving stops runs in flight; this catches one that was claimed meanwhile.
            raise RunFailed(archived, "archived")
        # The chain recorded when the run was created, not the agent's current one: editing an
        # agent never changes a run in flight, resumed or not (docs/design.md §1.10).
        chain = run.hook_chain if run.hook_chain is not None else await db(chains.run_hook_chain, run=run)
        try:
            registry = chains.registry_for_chain(chain, owner=self.chain_owner)
        except chains.ChainUnavailable as exc:
            raise RunFailed(str(exc), "hooks") from None
        return chain, registry

    async def _essentials(self) -> Essentials:
        """What the run needs before its first step, or :class:`RunFailed` (fail closed): besides
        :meth:`_hooks`, a misconfigured model or tools that cannot be built stop the run before
        any tool runs."""
        chain, registry = await self._hooks()
        agent = self.run.agent
        try:
            provider = self.provider_factory(agent.provider_config())
        except LLMError as exc:
            raise RunFailed(f"the agent's model is misconfigured: {exc}", "llm") from None
        try:
            tools = await db(self.tools_factory or tools_for_agent, agent=agent)
        except ToolboxError as exc:
            raise RunFailed(f"the agent's tools cannot be built: {exc}", "tools") from None
        sandbox = chain.get("sandbox")
        if sandbox is not None:
            # An eval's run (or a step or delegate inside one): no tool reaches the outside
            # world unless the eval set calls it live, and the trace says so first.
            tools = sandboxed_tools(tools, sandbox)
            if self.started_here:
                self.journal.emit(
                    ev.HOOK_SIDE_EFFECT,
                    {
                        "tool_call_id": None,
                        "hook": "eval_runner",
                        "point": "SessionStart",
                        "message": sandbox_note(sandbox),
                        "failure": False,
                    },
                )
        return Essentials(chain=chain, registry=registry, provider=provider, tools=tools)

    async def _complete(
        self,
        provider: LLMProvider,
        *,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_delta: DeltaCallback | None = None,
    ) -> LLMResponse:
        """One model call (a new answer: its deltas, streamed through ``on_delta`` if given, are
        numbered from 0); a model that gives no answer fails the run (stage ``llm``)."""
        self.journal.start_deltas()
        try:
            if not telemetry.ENABLED:
                return await provider.complete(messages=messages, tools=tools, on_delta=on_delta)
            attributes = {"fim.run.id": self.run_id, "fim.llm.provider": type(provider).__name__}
            with telemetry.span("fim.llm", attributes=attributes) as span:
                response = await provider.complete(messages=messages, tools=tools, on_delta=on_delta)
                span.set_attribute("fim.llm.tool_calls", len(response.tool_calls))
                return response
        except LLMError as exc:
            raise RunFailed(str(exc), "llm") from None
