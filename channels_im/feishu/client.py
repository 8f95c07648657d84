"""The Feishu Open API through the official ``lark-oapi`` SDK: one client per app per process,
and every way a call can fail turned into a :class:`~approvals.channel_contract.DeliveryError`.

The SDK is imported lazily: importing it takes seconds, and a callback must be answered within
three (the callback path needs nothing from it).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from approvals.channel_contract import DeliveryError
from channels_im.feishu.config import FeishuSettings

if TYPE_CHECKING:
    from lark_oapi import Client
    from lark_oapi.core.model import BaseResponse

log = logging.getLogger(__name__)

R = TypeVar("R", bound="BaseResponse")

#: Feishu answers these when a retry may help: internal errors (1500, 1503), the rate limit of its
#: frequency-control guide (99991400, with HTTP 429 — or HTTP 400 from older APIs), its rate
#: limit under system pressure (11232) and the per-chat send limit (230020).
RETRYABLE_CODES = frozenset({1500, 1503, 11232, 99991400, 230020})
#: The tenant token was refused (invalid / expired): forget it so the next attempt fetches a new one.
INVALID_TOKEN_CODES = frozenset({99991663, 99991677})

# --- the SDK client ------------------------------------------------------------------------------

_clients: dict[tuple[str, str, str, float], Client] = {}
_clients_lock = threading.Lock()


def sdk_client(conf: FeishuSettings) -> Client:
    """The ``lark_oapi.Client`` for this app, built once per process per (app_id, app_secret,
    domain, timeout) and shared by every channel instance and thread.

    The SDK fetches the tenant token on first use and caches it until ten minutes before it
    expires (in a process-global cache keyed by app id); reusing one client per app keeps every
    send on that cached token instead of one token request per call.
    """
    # The secret is part of the key so that rotating it builds a new client; keep only its hash.
    key = (conf.app_id, hashlib.sha256(conf.app_secret.encode()).hexdigest(), conf.domain, conf.timeout)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            import lark_oapi

            client = (
                lark_oapi.Client.builder()
                .app_id(conf.app_id)
                .app_secret(conf.app_secret)
                .domain(conf.domain)
                .timeout(conf.timeout)
                .build()
            )
            _clients[key] = client
        return client


def _forget_tenant_token(app_id: str) -> None:
    from lark_oapi.core.token import TokenManager

    # The SDK has no eviction call; an empty, already expired entry makes it fetch a new token.
    TokenManager.cache.set(f"self_tenant_token:{app_id}", "", 0)


def call(conf: FeishuSettings, operation: str, send: Callable[[], R]) -> R:
    """Run one SDK call and turn every way it can fail into a :class:`DeliveryError`.

    Retryable: timeouts, connection errors, HTTP 5xx / 429, non-JSON answers (a gateway error
    page), rate-limit and internal-error codes, a refused tenant token. Not retryable: refused
    credentials, permissions, a bot outside the chat, invalid content — what only an operator
    can fix.
    """
    import requests
    from lark_oapi.core.exception import ObtainAccessTokenException

    try:
        response = send()
    except requests.Timeout:
        raise DeliveryError(
            f"Feishu did not answer the {operation} within {conf.timeout:g} s", retryable=True
        ) from None
    except requests.RequestException as exc:
        raise DeliveryError(
            f"could not reach Feishu at {conf.domain} for the {operation}: {type(exc).__name__}: "
            f"{str(exc)[:200]}",
            retryable=True,
        ) from None
    except ObtainAccessTokenException as exc:
        raise DeliveryError(
            f"Feishu refused the app credentials (code {exc.code}: {exc.msg}): check app_id and app_secret",
            retryable=exc.code in RETRYABLE_CODES,
        ) from None
    except ValueError:  # the SDK parses every answer as JSON
        raise DeliveryError(
            f"Feishu answered the {operation} with something that is not JSON (a gateway error?)",
            retryable=True,
        ) from None
    except Exception as exc:  # a failure of the SDK itself must still end as a logged attempt
        log.exception("the Feishu SDK failed during the %s", operation)
        raise DeliveryError(
            f"the Feishu {operation} failed: {type(exc).__name__}: {str(exc)[:200]}", retryable=True
        ) from None
    if response.success():
        return response
    status = response.raw.status_code if response.raw is not None else None
    if response.code in INVALID_TOKEN_CODES:
        _forget_tenant_token(conf.app_id)
    retryable = (
        status is None
        or status >= 500
        or status == 429
        or response.code in RETRYABLE_CODES
        or response.code in INVALID_TOKEN_CODES
    )
    raise DeliveryError(
        f"Feishu refused the {operation}: code {response.code}: {response.msg} "
        f"(HTTP {status}, log id {response.get_log_id()})",
        retryable=retryable,
    )
