"""The single sign-on fixtures (a pytest plugin of tests/conftest.py, so the browser tests have them
too): the real provider (one per test module) and settings."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache

from tests.oidc_provider.kit import Provider
from tests.sso.kit import CLIENT_ID, CLIENT_SECRET, REDIRECT_URI


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    """One provider per test module, stopped when the module ends (no process outlives the tests
    that use it: tests/hooks checks that none is left running); a test that rotates its keys
    restores what it changed."""
    with Provider(tmp_path_factory.mktemp("idp")) as provider:
        provider.set_client(CLIENT_ID, CLIENT_SECRET, [REDIRECT_URI], [])
        provider.set_client("another-app", "another-secret", [REDIRECT_URI], [])
        yield provider


@pytest.fixture
def sso_settings(settings: Any) -> Any:
    """The provider lives on the loopback: the egress guard lets it through, as EGRESS_ALLOW would
    let an organisation's internal provider through."""
    settings.EGRESS_ALLOW = ["127.0.0.0/8", "::1", "localhost"]
    cache.clear()
    yield settings
    cache.clear()
