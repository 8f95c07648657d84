"""Validating a Feishu channel's configuration (:class:`channels_im.models.ChannelConfig`)::

    secrets       = {"app_id", "app_secret", "verification_token", "encrypt_key"}
    settings_json = {"chat_id": "oc_…", "domain": "https://open.feishu.cn", "timeout": 5}

``domain`` is optional (``https://open.larksuite.com`` for Lark; tests point it at a local fake),
so is ``timeout`` (seconds per HTTP call). All four secrets are required: without the Encrypt Key a
callback carries no signature and no timestamp, so it could be neither authenticated beyond a
static token nor bounded in time (docs/design.md §1.7), and such a channel refuses every click.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from channels_im.verification import secure_origin, text

DEFAULT_DOMAIN = "https://open.feishu.cn"
DEFAULT_TIMEOUT_SECONDS = 5.0
MAX_TIMEOUT_SECONDS = 30.0
SECRET_FIELDS = ("app_id", "app_secret", "verification_token", "encrypt_key")


class FeishuConfigError(ValueError):
    """The channel configuration is incomplete or invalid; the message says what to fix."""


@dataclass(frozen=True)
class FeishuSettings:
    app_id: str
    app_secret: str
    verification_token: str
    encrypt_key: str
    chat_id: str
    domain: str
    timeout: float


def _domain(value: Any) -> str:
    domain = text(value).rstrip("/") or DEFAULT_DOMAIN
    # The app secret and tenant token travel to this origin: https only, except to this machine.
    if not secure_origin(domain):
        raise FeishuConfigError(
            f"settings_json.domain must be an https origin such as {DEFAULT_DOMAIN} (got {domain!r})"
        )
    return domain


def _timeout(value: Any) -> float:
    if value is None:
        return DEFAULT_TIMEOUT_SECONDS
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_TIMEOUT_SECONDS:
        raise FeishuConfigError(
            f"settings_json.timeout must be a number of seconds in (0, {MAX_TIMEOUT_SECONDS:g}], "
            f"got {value!r}"
        )
    return float(value)


def feishu_settings(config: Any) -> FeishuSettings:
    """The validated settings of a Feishu :class:`ChannelConfig`. Raises :class:`FeishuConfigError`
    naming every missing or invalid field."""
    if config is None:
        raise FeishuConfigError("a Feishu channel needs a channel configuration")
    secrets = config.secrets if isinstance(config.secrets, dict) else {}
    options = config.settings_json if isinstance(config.settings_json, dict) else {}
    missing = [f"secrets.{name}" for name in SECRET_FIELDS if not text(secrets.get(name))]
    if not text(options.get("chat_id")):
        missing.append("settings_json.chat_id")
    if missing:
        raise FeishuConfigError(f"the Feishu channel {config.name!r} is incomplete: set {', '.join(missing)}")
    chat_id = text(options["chat_id"])
    if not chat_id.startswith("oc_"):
        raise FeishuConfigError(
            f"settings_json.chat_id must be a Feishu group chat id (oc_…), got {chat_id!r}"
        )
    return FeishuSettings(
        app_id=text(secrets["app_id"]),
        app_secret=text(secrets["app_secret"]),
        verification_token=text(secrets["verification_token"]),
        encrypt_key=text(secrets["encrypt_key"]),
        chat_id=chat_id,
        domain=_domain(options.get("domain")),
        timeout=_timeout(options.get("timeout")),
    )
