#!/usr/bin/env python3
"""An MCP server written with the official SDK, for the tests: a record store with a read-only
tool, a destructive one, a slow one and one that answers ``isError``.

Run it as ``records.py stdio`` or ``records.py http PORT``. Every call that starts or ends is
appended, one JSON line each, to the file named by ``RECORDS_LOG`` (when set), so that a test in
another process can count what the server really did: ``{"tool", "event": "start" | "end" |
"cancelled", "args", "pid"}``.
"""

from __future__ import annotations

import json
import os
import sys

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("records", instructions="A record store used by FIM One's tests.")
RECORDS = {"r-1": {"id": "r-1", "title": "First record"}, "r-2": {"id": "r-2", "title": "Second record"}}


def note(tool: str, event: str, **args: object) -> None:
    path = os.environ.get("RECORDS_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps({"tool": tool, "event": event, "args": args, "pid": os.getpid()}) + "\n")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True), structured_output=True)
def lookup(record_id: str) -> dict[str, str]:
    """Read one record by its id."""
    note("lookup", "start", record_id=record_id)
    record = RECORDS.get(record_id)
    if record is None:
        raise ValueError(f"no record {record_id}")
    return record


@server.tool(annotations=ToolAnnotations(destructiveHint=True, readOnlyHint=False))
def delete_record(record_id: str) -> str:
    """Delete a record for good."""
    note("delete_record", "start", record_id=record_id)
    RECORDS.pop(record_id, None)
    note("delete_record", "end", record_id=record_id)
    return f"deleted {record_id}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def slow(seconds: float) -> str:
    """Wait, then answer."""
    note("slow", "start", seconds=seconds)
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        note("slow", "cancelled", seconds=seconds)
        raise
    note("slow", "end", seconds=seconds)
    return f"waited {seconds}s"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def fail(reason: str = "the ledger is closed") -> str:
    """Always fails (the server answers isError)."""
    note("fail", "start", reason=reason)
    raise ToolError(reason)


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
