"""The audit chain's key (docs/design.md §1.15) comes from the environment, outside the database:
required in production, at least 32 characters, derived from SECRET_KEY in development."""

from __future__ import annotations

import pytest

from fimone.audit_chain import chain_keys, current_key
from tests.fimone.test_settings import start_django

pytestmark = pytest.mark.once  # subprocesses and pure code: one stack is enough (pyproject.toml)

PRODUCTION = {
    "FIMONE_ENV": "production",
    "SECRET_KEY": "x" * 50,
    "ALLOWED_HOSTS": "fimone.example.com",
    "SITE_URL": "https://fimone.example.com",
    "FIELD_ENCRYPTION_KEY": "k" * 44,
}


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({}, "AUDIT_CHAIN_KEY is required when FIMONE_ENV=production"),
        ({"AUDIT_CHAIN_KEY": "changeme"}, "AUDIT_CHAIN_KEY must be at least 32 characters long"),
        (
            {"AUDIT_CHAIN_KEY": "a" * 32, "AUDIT_CHAIN_RETIRED_KEYS": "b" * 32 + ",short"},
            "AUDIT_CHAIN_RETIRED_KEYS must list keys of at least 32 characters",
        ),
        (
            {"AUDIT_CHAIN_KEY": "a" * 32, "AUDIT_ANCHOR_URL": "ftp://anchors.example"},
            "AUDIT_ANCHOR_URL must be",
        ),
    ],
)
def test_production_refuses_to_start_without_a_proper_audit_key_naming_it(env: dict, says: str) -> None:
    proc = start_django(**PRODUCTION, **env)

    assert proc.returncode != 0
    assert says in proc.stderr and "Traceback" not in proc.stderr


def test_production_starts_with_its_audit_key_and_anchor_store() -> None:
    proc = start_django(
        **PRODUCTION, AUDIT_CHAIN_KEY="a" * 32, AUDIT_ANCHOR_URL="https://anchors.example/fimone"
    )
    assert proc.returncode == 0, proc.stderr


def test_in_development_the_key_is_derived_from_secret_key_and_differs_from_it(settings) -> None:
    settings.AUDIT_CHAIN_KEY = None
    derived = current_key()
    settings.SECRET_KEY = "another-development-secret-key-0123456789"
    assert current_key() != derived
    assert settings.SECRET_KEY.encode() not in (derived.secret, current_key().secret)


def test_a_configured_key_writes_and_retired_keys_only_verify(settings) -> None:
    settings.AUDIT_CHAIN_KEY = "c" * 32
    settings.AUDIT_CHAIN_RETIRED_KEYS = ["d" * 32]
    writing, retired = chain_keys()
    assert (writing.secret, retired.secret) == (b"c" * 32, b"d" * 32)
    assert writing.key_id != retired.key_id and len(writing.key_id) == 16
