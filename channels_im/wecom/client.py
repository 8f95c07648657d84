"""The WeCom server API (``qyapi.weixin.qq.com``): the access token, and calls that turn every way
they can fail into a :class:`~approvals.channel_contract.DeliveryError`.

``GET /cgi-bin/gettoken?corpid=…&corpsecret=…`` answers ``{"errcode": 0, "access_token": …,
"expires_in": 7200}``; it is cached per process per app until five minutes before it expires, and
forgotten (then fetched again, once) when a call answers that it expired or is invalid. Errors come
as HTTP 200 with a non-zero ``errcode``.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from typing import Any

import httpx

from approvals.channel_contract import DeliveryError
from channels_im.wecom.config import WecomSettings
from fimone.egress import shared_tls
from fimone.parsers import loads as json_loads

log = logging.getLogger(__name__)

TOKEN_REFRESH_MARGIN_SECONDS = 300
#: The access token expired or is not valid (any more): fetch a new one and try once more.
INVALID_TOKEN_CODES = frozenset({40014, 42001})
#: "System busy" and the frequency limits: a later attempt may succeed.
RETRYABLE_CODES = frozenset({-1, 45009, 45033, 45047})

_tokens: dict[tuple[str, str, str], tuple[str, float]] = {}
_tokens_lock = threading.Lock()


def _token_key(conf: WecomSettings) -> tuple[str, str, str]:
    # The secret is part of the key so that rotating it fetches a new token; keep only its hash.
    return (conf.corp_id, hashlib.sha256(conf.secret.encode()).hexdigest(), conf.api_base)


def forget_token(conf: WecomSettings) -> None:
    with _tokens_lock:
        _tokens.pop(_token_key(conf), None)


def _errcode(answer: dict[str, Any]) -> int | None:
    code = answer.get("errcode", 0)
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def _request(conf: WecomSettings, method: str, path: str, operation: str, **kwargs: Any) -> dict[str, Any]:
    """One HTTP call; the JSON object it answered (whatever its errcode)."""
    url = f"{conf.api_base}{path}"
    try:
        with httpx.Client(timeout=conf.timeout, follow_redirects=False, verify=shared_tls()) as client:
            response = client.request(method, url, **kwargs)
    except httpx.TimeoutException:
        raise DeliveryError(
            f"WeCom did not answer the {operation} within {conf.timeout:g} s", retryable=True, maybe_sent=True
        ) from None
    except httpx.ConnectError as exc:
        raise DeliveryError(
            f"could not reach WeCom at {conf.api_base} for the {operation}: {type(exc).__name__}",
            retryable=True,
        ) from None
    except httpx.HTTPError as exc:  # dropped mid-answer: the call may have been carried out
        raise DeliveryError(
            f"the WeCom {operation} failed: {type(exc).__name__}", retryable=True, maybe_sent=True
        ) from None
    if response.status_code != 200:
        raise DeliveryError(
            f"WeCom answered the {operation} with HTTP {response.status_code}",
            retryable=response.status_code >= 500 or response.status_code == 429,
        )
    try:
        answer = json_loads(response.content)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise DeliveryError(
            f"WeCom answered the {operation} with something that is not JSON (a gateway error?)",
            retryable=True,
        )
    return answer


def access_token(conf: WecomSettings) -> str:
    """The app's access token, cached until shortly before it expires. Raises :class:`DeliveryError`."""
    key = _token_key(conf)
    with _tokens_lock:
        cached = _tokens.get(key)
    if cached is not None and cached[1] > time.monotonic():
        return cached[0]
    answer = _request(
        conf,
        "GET",
        "/cgi-bin/gettoken",
        "token request",
        params={"corpid": conf.corp_id, "corpsecret": conf.secret},
    )
    code, token, expires_in = _errcode(answer), answer.get("access_token"), answer.get("expires_in", 7200)
    if code != 0 or not isinstance(token, str) or not token:
        raise DeliveryError(
            f"WeCom refused the app credentials (errcode {code}: {str(answer.get('errmsg'))[:200]}): "
            "check corp_id and secret",
            retryable=code in RETRYABLE_CODES,
        )
    lifetime = expires_in if isinstance(expires_in, int) and not isinstance(expires_in, bool) else 7200
    with _tokens_lock:
        _tokens[key] = (token, time.monotonic() + max(lifetime - TOKEN_REFRESH_MARGIN_SECONDS, 0))
    return token


def post(conf: WecomSettings, path: str, body: dict[str, Any], *, operation: str) -> dict[str, Any]:
    """POST ``body`` to ``path`` with the access token; the answer when ``errcode`` is 0. Raises
    :class:`DeliveryError` (retryable for transport failures, rate limits and "system busy"; not
    for what only an operator can fix: credentials, permissions, recipients, content)."""
    answer = _request(conf, "POST", path, operation, params={"access_token": access_token(conf)}, json=body)
    code = _errcode(answer)
    if code in INVALID_TOKEN_CODES:  # expired or revoked since it was cached: fetch it again, once
        forget_token(conf)
        answer = _request(
            conf, "POST", path, operation, params={"access_token": access_token(conf)}, json=body
        )
        code = _errcode(answer)
    if code == 0:
        return answer
    raise DeliveryError(
        f"WeCom refused the {operation}: errcode {code}: {str(answer.get('errmsg'))[:200]}",
        retryable=code in RETRYABLE_CODES or code in INVALID_TOKEN_CODES,
    )
