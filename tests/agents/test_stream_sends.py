"""How a run's journal sends its stream: at once when the run is idle, together when it is busy."""

from __future__ import annotations

import asyncio
from typing import Any

from agents.engine import journal as journal_module
from agents.engine.journal import RunJournal


class RecordingLayer:
    """A channel layer that keeps what it was asked to send, and sends it nowhere."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        self.sent.append(message)


def texts_of(message: dict[str, Any]) -> list[str]:
    events = message["events"] if message["type"] == "run.events" else [message["event"]]
    return [event["payload"]["text"] for event in events]


def test_a_busy_runs_pieces_leave_together_after_its_first_went_at_once(monkeypatch) -> None:
    # A spacing no loaded machine's scheduling comes near, so the test never sits on a clock's edge.
    monkeypatch.setattr(journal_module, "STREAM_SPACING_SECONDS", 0.2)
    layer = RecordingLayer()

    async def scenario() -> None:
        journal = RunJournal(1, owner="test")
        journal.layer = layer
        await journal.on_delta("a")
        for _ in range(5):
            await asyncio.sleep(0)
        assert [texts_of(m) for m in layer.sent] == [["a"]], "an idle run's first piece goes at once"
        for text in "bcdefghij":
            await journal.on_delta(text)
            await asyncio.sleep(0)  # the sender has every chance to send each on its own
        await journal.flush_stream()

    asyncio.run(scenario())

    assert [text for message in layer.sent for text in texts_of(message)] == list("abcdefghij")
    assert len(layer.sent) == 2, "what the busy run queued within the spacing left as one message"
