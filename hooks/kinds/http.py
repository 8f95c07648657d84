"""``http`` hooks: the event POSTed as JSON to a URL, answered with the same protocol as commands.

Contract: the body is the event JSON (:func:`hooks.kinds.protocol.event_payload`); the header
``X-Fimone-Signature: sha256=<hex>`` is the HMAC-SHA256 of the exact body bytes under the
declaration's secret (stored encrypted), so the receiver can check who sent it; the body's
``fimone.sent_at`` lets it refuse old deliveries. Redirects are not followed. A non-2xx status, a
reply past ``HOOK_HTTP_MAX_REPLY`` bytes, a reply that is not a protocol answer, or no answer
within the timeout fails (closed unless ``on_error: allow``). A 2xx with an empty body allows.
The URL's host must resolve to a public address, or one ``EGRESS_ALLOW`` lists
(:mod:`fimone.egress`); any other is refused before anything is sent, and the hook fails like any
hook error, naming the refusal.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any, Unpack
from urllib.parse import urlsplit

import httpx
from django.conf import settings

from fimone import egress
from hooks.contract import HookContext, HookResult
from hooks.kinds.base import Declared, DeclaredHook
from hooks.kinds.protocol import ProtocolError, event_payload, parse_reply, result_from_reply

SIGNATURE_HEADER = "X-Fimone-Signature"


class HttpHookFailed(RuntimeError):
    """The endpoint did not answer within the protocol."""


def sign(secret: str, body: bytes) -> str:
    """The signature header's value for ``body``: ``sha256=`` and the hex HMAC-SHA256."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def check_url(url: Any) -> str:
    if not isinstance(url, str):
        raise ValueError("url must be a string")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("url must be an http:// or https:// URL with a host")
    if parts.username or parts.password:
        raise ValueError("url must not carry credentials; the body is signed with the hook's secret")
    return url


def check_secret(secret: Any) -> str:
    if not isinstance(secret, str) or len(secret) < 16:
        raise ValueError("an http hook needs a signing secret of at least 16 characters")
    return secret


class HttpHook(DeclaredHook):
    kind = "http"

    def __init__(
        self,
        *,
        url: str,
        secret: str,
        **declared: Unpack[Declared],
    ) -> None:
        super().__init__(**declared)
        self.url = check_url(url)
        self._secret = check_secret(secret)

    def __repr__(self) -> str:  # never the secret
        return f"<HttpHook {self.hook_name} point={self.point} url={self.url}>"

    async def execute(self, ctx: HookContext) -> HookResult:
        event = json.loads(event_payload(ctx, hook_name=self.hook_name))
        event["fimone"]["sent_at"] = int(time.time())
        body = json.dumps(event, ensure_ascii=False).encode()
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: sign(self._secret, body),
            "User-Agent": "fimone-hooks",
        }
        cap = int(getattr(settings, "HOOK_HTTP_MAX_REPLY", 1_000_000))
        try:
            async with (
                httpx.AsyncClient(
                    timeout=self.timeout,
                    follow_redirects=False,
                    trust_env=False,
                    transport=egress.async_transport(
                        verify=egress.shared_tls(trust_env=False), trust_env=False
                    ),
                ) as client,
                client.stream("POST", self.url, content=body, headers=headers) as response,
            ):
                if not 200 <= response.status_code < 300:
                    raise HttpHookFailed(f"answered HTTP {response.status_code}")
                raw = bytearray()
                async for chunk in response.aiter_bytes():
                    raw += chunk
                    if len(raw) > cap:
                        raise HttpHookFailed(f"answered more than {cap} bytes")
        except egress.EgressRefused as exc:
            raise HttpHookFailed(str(exc)) from None
        except httpx.HTTPError as exc:
            raise HttpHookFailed(f"could not be reached ({type(exc).__name__})") from None
        try:
            reply = parse_reply(bytes(raw))
        except UnicodeDecodeError:
            raise ProtocolError("the hook's answer is not UTF-8 JSON") from None
        return result_from_reply(reply, ctx, hook_name=self.hook_name)
