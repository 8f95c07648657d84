#!/usr/bin/env python3
"""An MCP server with tools named like Claude Code's own (``Bash``, ``Write``, ``Read``), written
with the official SDK for the tests of Claude Code hooks on MCP tools. Nothing is run or written:
each call is appended, as one JSON line, to the file ``WORKSPACE_LOG`` names.

Run it as ``workspace.py`` (stdio).
"""

from __future__ import annotations

import json
import os

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("workspace")


def note(tool: str, **args: str) -> None:
    with open(os.environ["WORKSPACE_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"tool": tool, "args": args}) + "\n")


@server.tool(name="Bash", annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False))
def bash(command: str) -> str:
    """Run a shell command in the workspace."""
    note("Bash", command=command)
    return f"ran: {command}"


@server.tool(name="Write", annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False))
def write(file_path: str, content: str) -> str:
    """Write a file."""
    note("Write", file_path=file_path, content=content)
    return f"wrote {len(content)} characters to {file_path}"


@server.tool(name="Read", annotations=ToolAnnotations(readOnlyHint=True))
def read(file_path: str) -> str:
    """Read a file."""
    note("Read", file_path=file_path)
    return f"# {os.path.basename(file_path)}\nHello."


if __name__ == "__main__":
    server.run("stdio")
