"""Validating a WeCom channel's configuration (:class:`~channels_im.models.ChannelConfig`)::

    secrets       = {"secret": "<the app's Secret>", "token": "<callback Token>",
                     "encoding_aes_key": "<callback EncodingAESKey, 43 characters>"}
    settings_json = {"corp_id": "ww…", "agent_id": 1000002, "touser": "zhangsan|lisi",
                     "toparty": "", "totag": "", "api_base": "https://qyapi.weixin.qq.com",
                     "timeout": 5}

Cards go, as app messages of the self-built app ``agent_id``, to the members, departments or tags
named by ``touser`` / ``toparty`` / ``totag`` (``|``-separated, or a list; at least one).
``api_base`` is optional (tests point it at a local fake), so is ``timeout`` (seconds per call).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from channels_im.verification import secure_origin, text
from channels_im.wecom import crypto

DEFAULT_API_BASE = "https://qyapi.weixin.qq.com"
DEFAULT_TIMEOUT_SECONDS = 5.0
MAX_TIMEOUT_SECONDS = 30.0
SECRET_FIELDS = ("secret", "token", "encoding_aes_key")
RECIPIENT_FIELDS = ("touser", "toparty", "totag")
MAX_RECIPIENTS = 1000
"""WeCom takes at most 1,000 members (100 departments / tags) per message."""
_CORP_ID = re.compile(r"[A-Za-z0-9]{4,64}")
_RECIPIENT = re.compile(r"[A-Za-z0-9_.@-]{1,64}")
_TOKEN = re.compile(r"[A-Za-z0-9]{1,32}")


class WecomConfigError(ValueError):
    """The channel configuration is incomplete or invalid; the message says what to fix."""


@dataclass(frozen=True)
class WecomSettings:
    corp_id: str
    agent_id: int
    secret: str
    token: str
    aes_key: bytes
    touser: str
    toparty: str
    totag: str
    api_base: str
    timeout: float


def _recipients(name: str, value: Any) -> str:
    if value is None or value == "":
        return ""
    items = value.split("|") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise WecomConfigError(f"settings_json.{name} must be ids separated by | (or a list of ids)")
    items = [item.strip() for item in items if item.strip()]
    if value == "@all" or items == ["@all"]:
        return "@all" if name == "touser" else ""
    if len(items) > MAX_RECIPIENTS or not all(_RECIPIENT.fullmatch(item) for item in items):
        raise WecomConfigError(f"settings_json.{name} holds an invalid id (letters, digits, _ . @ -)")
    return "|".join(items)


def _agent_id(value: Any) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**31:
        raise WecomConfigError(f"settings_json.agent_id must be the app's AgentId (a number), got {value!r}")
    return value


def _timeout(value: Any) -> float:
    if value is None:
        return DEFAULT_TIMEOUT_SECONDS
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_TIMEOUT_SECONDS:
        raise WecomConfigError(
            f"settings_json.timeout must be a number of seconds in (0, {MAX_TIMEOUT_SECONDS:g}], "
            f"got {value!r}"
        )
    return float(value)


def wecom_settings(config: Any) -> WecomSettings:
    """The validated settings of a WeCom :class:`ChannelConfig`. Raises :class:`WecomConfigError`
    naming what is missing or invalid (never echoing a secret)."""
    if config is None:
        raise WecomConfigError("a WeCom channel needs a channel configuration")
    secrets = config.secrets if isinstance(config.secrets, dict) else {}
    options = config.settings_json if isinstance(config.settings_json, dict) else {}
    missing = [f"secrets.{name}" for name in SECRET_FIELDS if not text(secrets.get(name))]
    missing += [
        f"settings_json.{name}" for name in ("corp_id", "agent_id") if options.get(name) in (None, "")
    ]
    if missing:
        raise WecomConfigError(f"the WeCom channel {config.name!r} is incomplete: set {', '.join(missing)}")
    corp_id = text(options["corp_id"])
    if not _CORP_ID.fullmatch(corp_id):
        raise WecomConfigError(f"settings_json.corp_id must be the CorpID (ww…), got {corp_id[:80]!r}")
    token = text(secrets["token"])
    if not _TOKEN.fullmatch(token):
        raise WecomConfigError("secrets.token must be the callback Token: 1 to 32 letters and digits")
    try:
        key = crypto.aes_key(text(secrets["encoding_aes_key"]))
    except ValueError:
        raise WecomConfigError(
            f"secrets.encoding_aes_key must be the callback EncodingAESKey: "
            f"{crypto.ENCODING_AES_KEY_CHARS} letters and digits"
        ) from None
    recipients = {name: _recipients(name, options.get(name)) for name in RECIPIENT_FIELDS}
    if not any(recipients.values()):
        raise WecomConfigError("set settings_json.touser, toparty or totag: who receives the approval cards")
    api_base = text(options.get("api_base")).rstrip("/") or DEFAULT_API_BASE
    # The app secret and access token travel to this origin: https only, except to this machine.
    if not secure_origin(api_base):
        raise WecomConfigError(
            f"settings_json.api_base must be an https origin such as {DEFAULT_API_BASE} "
            f"(got {api_base[:200]!r})"
        )
    return WecomSettings(
        corp_id=corp_id,
        agent_id=_agent_id(options["agent_id"]),
        secret=text(secrets["secret"]),
        token=token,
        aes_key=key,
        api_base=api_base,
        timeout=_timeout(options.get("timeout")),
        **recipients,
    )
