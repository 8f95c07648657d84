"""``python manage.py outbox_relay``: send the outbox's Celery tasks as their transactions commit
(:mod:`fimone.outbox`). Run one or more beside the workers; stops cleanly on SIGTERM / SIGINT."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, connections

from fimone.celery import app
from fimone.outbox import relay_forever


class Command(BaseCommand):
    help = "Send the Celery tasks queued in the outbox as their transactions commit (PostgreSQL)."

    def handle(self, *args: Any, **options: Any) -> None:
        if connections[DEFAULT_DB_ALIAS].vendor != "postgresql":
            raise CommandError("the outbox relay needs PostgreSQL (DATABASE_URL=postgres://…)")
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        relay_forever(app, stop=stop)
