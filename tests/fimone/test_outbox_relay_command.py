"""``manage.py outbox_relay`` says what it needs on a database it cannot relay from."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.db import connection


@pytest.mark.django_db
def test_the_relay_refuses_to_start_without_postgresql() -> None:
    if connection.vendor == "postgresql":
        pytest.skip("this database has the relay's NOTIFY")  # the relay itself: tests/fimone/test_outbox.py
    with pytest.raises(CommandError, match="needs PostgreSQL"):
        call_command("outbox_relay")
