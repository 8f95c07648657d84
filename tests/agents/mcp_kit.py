"""MCP servers for the tests, and connectors to them: the records server (tests/mcp_servers/
records.py, written with the official SDK) over stdio or Streamable HTTP, in a process of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agents.mcp_connectors import connector_tools_refresh
from agents.models import Connector, ConnectorAction
from agents.models.connectors import mcp_server_claim
from tenancy.models import Organization
from tests.agents.engine_kit import Harness

RECORDS_SERVER = str(Path(__file__).resolve().parent.parent / "mcp_servers" / "records.py")


def server_log(path: Path) -> list[dict[str, Any]]:
    """What the records server did, one entry per call start / end / cancellation."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def calls_of(path: Path, tool: str) -> list[dict[str, Any]]:
    return [e["args"] for e in server_log(path) if e["tool"] == tool and e["event"] == "start"]


def mcp_connector(org: Organization, *, slug: str = "records", **fields: Any) -> Connector:
    """An MCP connector, read back so its secrets come out of the encrypted field."""
    connector = Connector.objects.create(
        organization=org, slug=slug, name=slug.title(), kind=Connector.Kind.MCP, **fields
    )
    return Connector.objects.get(pk=connector.pk)


def stdio_connector(org: Organization, log: Path, *, slug: str = "records", **fields: Any) -> Connector:
    return mcp_connector(
        org,
        slug=slug,
        mcp_transport=Connector.Transport.STDIO,
        command=[sys.executable, RECORDS_SERVER, "stdio"],
        secrets={"env": {"RECORDS_LOG": str(log)}},
        **fields,
    )


def http_connector(org: Organization, url: str, *, slug: str = "records", **fields: Any) -> Connector:
    return mcp_connector(org, slug=slug, mcp_transport=Connector.Transport.HTTP, base_url=url, **fields)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def records_over_http(log: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The records server over Streamable HTTP in a process of its own: ``(endpoint, process)``."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, RECORDS_SERVER, "http", str(port)],
        env={**os.environ, "RECORDS_LOG": str(log)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the records server did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", process
    finally:
        process.kill()
        process.wait(timeout=10)


def listed(connector: Connector, *, reviewed: bool = True) -> dict[str, ConnectorAction]:
    """List the server's tools into the connector; its actions by the server's names.

    A listed tool starts as a write that asks a person, whatever its server claims
    (``agents.mcp_connectors``). ``reviewed``: then set each tool's flags as an operator who read
    the server's hints and agreed with them would, in the admin (what the test servers' hints say
    is true of them)."""
    connector_tools_refresh(connector=connector, actor=None)
    if reviewed:
        for action in connector.actions.exclude(remote_name=""):
            writes, destructive = mcp_server_claim(action.annotations)
            ConnectorAction.objects.filter(pk=action.pk).update(
                is_write=writes, requires_confirmation=destructive
            )
    return {a.remote_name: a for a in connector.actions.all()}


class ToolboxHarness(Harness):
    """Runs the engine in-process with the agent's real tools (its connectors' actions)."""

    def options(self) -> dict[str, Any]:
        return {"provider_factory": self.provider}
