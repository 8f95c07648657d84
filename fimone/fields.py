"""Model fields that keep secrets encrypted at rest (Fernet, keyed by FIELD_ENCRYPTION_KEY).

The clear value exists only in memory. In development without FIELD_ENCRYPTION_KEY the key is
derived from SECRET_KEY, so a development database moved to production stays unreadable there.
"""

from __future__ import annotations

import base64
import hashlib
import json
from functools import lru_cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import models


@lru_cache(maxsize=4)
def _fernet(key: str | None, secret: str) -> Fernet:
    if key:
        try:
            return Fernet(key.encode())
        except ValueError:
            raise ImproperlyConfigured(
                "FIELD_ENCRYPTION_KEY must be a Fernet key (32 url-safe base64-encoded bytes)"
            ) from None
    derived = hashlib.sha256(b"fimone-field-encryption:" + secret.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(derived))


def fernet() -> Fernet:
    return _fernet(settings.FIELD_ENCRYPTION_KEY, settings.SECRET_KEY)


def encrypt_text(value: str) -> str:
    return fernet().encrypt(value.encode()).decode()


def decrypt_text(token: str) -> str:
    try:
        return fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise ImproperlyConfigured(
            "a stored secret cannot be decrypted: FIELD_ENCRYPTION_KEY differs from the one that wrote it"
        ) from None


class EncryptedJSONField(models.TextField):
    """A JSON value (dict of secrets, a DSN string, …) stored as a Fernet token."""

    description = "JSON encrypted at rest"

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> Any:
        if value is None or value == "":
            return None
        return json.loads(decrypt_text(value))

    def to_python(self, value: Any) -> Any:
        return value

    def get_prep_value(self, value: Any) -> str | None:
        if value is None:
            return None
        return encrypt_text(json.dumps(value, sort_keys=True))
