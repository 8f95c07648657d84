"""The personas and factories every test shares.

Filled as the apps grow: organisations, users for each role, agents, connectors and runs.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

User = get_user_model()


@pytest.fixture
def superuser(db):
    return User.objects.create_superuser("root", "root@example.test", "root-pass-123")
