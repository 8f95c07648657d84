"""Typed readers for environment variables that fail loudly.

A bad value stops the process at start-up with one line naming the variable, rather than a
traceback or, worse, a silent fallback. :class:`EnvError` is a ``SystemExit`` so that
``manage.py``, Daphne and Celery all print just that line and exit non-zero.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import dj_database_url

from fimone.egress import parse_allow


class EnvError(SystemExit):
    """A configuration variable is missing or malformed. ``str(err)`` is the one-line message."""

    def __init__(self, variable: str, problem: str) -> None:
        self.variable = variable
        self.problem = problem
        super().__init__(f"fimone: configuration error: {variable} {problem}")

    def __str__(self) -> str:
        return str(self.code)


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _raw(name: str, environ: Mapping[str, str] | None) -> str | None:
    value = (os.environ if environ is None else environ).get(name)
    if value is None or value.strip() == "":
        return None
    return value.strip()


def env_str(name: str, default: str | None = None, *, environ: Mapping[str, str] | None = None) -> str | None:
    value = _raw(name, environ)
    return default if value is None else value


def env_required(name: str, why: str, *, environ: Mapping[str, str] | None = None) -> str:
    value = _raw(name, environ)
    if value is None:
        raise EnvError(name, f"is required {why}")
    return value


def env_bool(name: str, default: bool, *, environ: Mapping[str, str] | None = None) -> bool:
    value = _raw(name, environ)
    if value is None:
        return default
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise EnvError(name, f"must be true or false (got {value!r})")


def env_int(
    name: str,
    default: int,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    value = _raw(name, environ)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise EnvError(name, f"must be a whole number (got {value!r})") from None
    if minimum is not None and number < minimum:
        raise EnvError(name, f"must be at least {minimum} (got {number})")
    if maximum is not None and number > maximum:
        raise EnvError(name, f"must be at most {maximum} (got {number})")
    return number


def env_float(
    name: str, default: float, *, minimum: float | None = None, environ: Mapping[str, str] | None = None
) -> float:
    value = _raw(name, environ)
    if value is None:
        return default
    try:
        number = float(value)
    except ValueError:
        raise EnvError(name, f"must be a number (got {value!r})") from None
    if number != number or (minimum is not None and number < minimum):  # NaN or below the floor
        raise EnvError(name, f"must be a number of at least {minimum} (got {value!r})")
    return number


def env_choice(
    name: str, default: str, choices: tuple[str, ...], *, environ: Mapping[str, str] | None = None
) -> str:
    value = _raw(name, environ)
    if value is None:
        return default
    if value not in choices:
        raise EnvError(name, f"must be one of {', '.join(choices)} (got {value!r})")
    return value


def env_list(name: str, default: list[str], *, environ: Mapping[str, str] | None = None) -> list[str]:
    value = _raw(name, environ)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def env_host_list(name: str, default: list[str], *, environ: Mapping[str, str] | None = None) -> list[str]:
    """Comma-separated host names, IP addresses and CIDR networks (or ``*``), as
    :func:`fimone.egress.parse_allow` reads them: anything else fails loudly."""
    items = env_list(name, default, environ=environ)
    try:
        parse_allow(items)
    except ValueError as exc:
        raise EnvError(
            name, f"must list host names, IP addresses or CIDR networks, comma-separated: {exc}"
        ) from None
    return items


def env_secret(
    name: str,
    *,
    required: str | None = None,
    minimum_length: int = 32,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """A secret key (``None`` when not set, unless ``required`` says when it is): at least
    ``minimum_length`` characters, so that a placeholder such as ``changeme`` fails loudly."""
    value = env_required(name, required, environ=environ) if required else _raw(name, environ)
    if value is not None and len(value) < minimum_length:
        raise EnvError(name, f"must be at least {minimum_length} characters long (a random secret)")
    return value


def env_secret_list(
    name: str, *, minimum_length: int = 32, environ: Mapping[str, str] | None = None
) -> list[str]:
    """Comma-separated secret keys, each at least ``minimum_length`` characters."""
    keys = env_list(name, [], environ=environ)
    if any(len(key) < minimum_length for key in keys):
        raise EnvError(name, f"must list keys of at least {minimum_length} characters each, comma-separated")
    return keys


def env_http_url(name: str, *, environ: Mapping[str, str] | None = None) -> str | None:
    """An ``http://`` or ``https://`` URL with a host, or ``None`` when not set."""
    url = _raw(name, environ)
    if url is None:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EnvError(name, f"must be an http:// or https:// URL (got scheme {parts.scheme or 'none'!r})")
    return url


_HEADER_NAME = re.compile(r"[A-Za-z0-9-]{1,100}")


def env_header(name: str, *, environ: Mapping[str, str] | None = None) -> str | None:
    """The ``request.META`` key of the HTTP header named by the variable (``X-Real-IP`` →
    ``HTTP_X_REAL_IP``), or ``None`` when it is not set."""
    value = _raw(name, environ)
    return None if value is None else _meta_key(name, value)


def _meta_key(name: str, header: str) -> str:
    if not _HEADER_NAME.fullmatch(header):
        raise EnvError(name, f"must name an HTTP header such as X-Forwarded-For (got {header!r})")
    return "HTTP_" + header.upper().replace("-", "_")


def env_header_value(name: str, *, environ: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """``("HTTP_X_FORWARDED_PROTO", "https")`` from ``X-Forwarded-Proto: https`` (Django's
    ``SECURE_PROXY_SSL_HEADER`` shape), or ``None`` when the variable is not set."""
    value = _raw(name, environ)
    if value is None:
        return None
    header, colon, expected = value.partition(":")
    if not colon or not expected.strip():
        raise EnvError(name, f"must be 'Header-Name: value', e.g. 'X-Forwarded-Proto: https' (got {value!r})")
    return _meta_key(name, header.strip()), expected.strip()


_RATE = re.compile(r"([0-9]{1,9})/(s|sec|second|m|min|minute|h|hour|d|day)")


def env_rate(name: str, default: str, *, environ: Mapping[str, str] | None = None) -> str:
    """A request rate in DRF's shape: ``30/min`` (per ``s``/``sec``, ``m``/``min``, ``h``/``hour``,
    ``d``/``day``), at least one request."""
    value = _raw(name, environ) or default
    match = _RATE.fullmatch(value)
    if match is None or int(match[1]) < 1:
        raise EnvError(
            name, f"must be a rate such as 30/min (requests per s, min, hour or day; got {value!r})"
        )
    return value


def env_database(name: str, default: str, *, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A Django ``DATABASES`` entry from a URL: ``postgres://…`` / ``postgresql://…`` (psycopg 3)
    or ``sqlite:///path``."""
    url = _raw(name, environ) or default
    scheme = urlsplit(url).scheme
    if scheme not in ("postgres", "postgresql", "pgsql", "sqlite"):
        raise EnvError(name, f"must be a postgres:// or sqlite:/// URL (got scheme {scheme or 'none'!r})")
    try:
        config = dj_database_url.parse(url, conn_max_age=0)
    except (ValueError, KeyError) as exc:
        raise EnvError(name, f"is not a valid database URL ({exc})") from None
    if scheme != "sqlite" and not config.get("NAME"):
        raise EnvError(name, "must name a database (postgres://user@host:5432/NAME)")
    return dict(config)


def env_redis_url(name: str, *, environ: Mapping[str, str] | None = None) -> str | None:
    url = _raw(name, environ)
    if url is None:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss", "unix") or (parts.scheme != "unix" and not parts.hostname):
        raise EnvError(name, f"must be a redis://host:port/db URL (got {url.split('@')[-1]!r})")
    try:
        parts.port  # noqa: B018 - raises on a non-numeric port
    except ValueError:
        raise EnvError(name, "has a port that is not a number") from None
    return url
