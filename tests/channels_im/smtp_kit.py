"""A real SMTP server for the e-mail tests: ``aiosmtpd`` in a process of its own, writing what it
receives into a Maildir the tests read."""

from __future__ import annotations

import mailbox
import re
import socket
import subprocess
import sys
import time
from email.message import Message
from pathlib import Path

START_SECONDS = 15.0  # a bound on waiting for the server to listen, never a measured delay


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class SmtpServer:
    """``python -m aiosmtpd`` on a free port, its mail in ``folder`` (a Maildir)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> SmtpServer:
        argv = [sys.executable, "-m", "aiosmtpd", "-n", "-l", f"127.0.0.1:{self.port}"]
        self.process = subprocess.Popen([*argv, "-c", "aiosmtpd.handlers.Mailbox", str(self.folder)])
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError("the SMTP server did not start") from None
                time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        self.process.terminate()
        self.process.wait(timeout=10)

    def messages(self) -> list[Message]:
        """What the server received, oldest first."""
        box = mailbox.Maildir(self.folder, create=False)
        return [box[key] for key in sorted(box.keys(), key=_arrival)]

    def to(self, address: str) -> list[Message]:
        return [m for m in self.messages() if address in str(m.get("To", ""))]


def _arrival(key: str) -> tuple[int, int, str]:
    """A Maildir key's time of arrival: ``<seconds>.M<microseconds>P…``."""
    found = re.match(r"(\d+)\.M(\d+)", key)
    return (int(found.group(1)), int(found.group(2)), key) if found else (0, 0, key)


def text_of(message: Message) -> str:
    """The plain-text part of ``message``."""
    for part in message.walk():
        if part.get_content_type() == "text/plain":
            payload = part.get_payload(decode=True)
            return payload.decode(part.get_content_charset() or "utf-8")
    return ""
