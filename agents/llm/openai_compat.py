"""A provider for any server that speaks OpenAI's streamed chat-completions API.

Configured from an agent's ``model_config_json`` (and its encrypted ``secrets``, whose
``api_key`` the engine adds in memory: ``Agent.provider_config()``)::

    {"provider": "openai", "model": "gpt-4o-mini",
     "base_url": "https://…/v1",                           # optional: see below
     "params": {"temperature": 0.2, "max_tokens": 800},    # sent verbatim in the request body
     "max_retries": 3, "timeout": 60,                      # retries after the first attempt; seconds
     "retry_base_delay": 0.5, "retry_max_delay": 30}       # back-off, in seconds

Where the key goes: the platform's ``OPENAI_API_KEY`` is sent only to the platform's endpoint,
``OPENAI_BASE_URL`` (or the SDK's default, OpenAI's own, when that is unset). An agent that names
its own ``base_url`` must bring its own ``api_key``; without one it is refused
(:func:`check_credentials`, run when the agent is saved and again when its provider is built), so
the platform's key can never be sent to an address an operator typed. Nothing else the SDK reads
from the environment (``OPENAI_ORG_ID``, ``OPENAI_PROJECT_ID``, ``OPENAI_CUSTOM_HEADERS``) goes to
an agent's own base URL either. The key never appears in an error message or in ``repr()``.

Where requests go: an agent's own ``base_url`` must resolve to a public address, or one
``EGRESS_ALLOW`` lists (:mod:`fimone.egress`, checked after DNS resolution and pinned for the
connection); anything else is an :class:`LLMError` before anything is sent, never retried. The
platform's own endpoint (``OPENAI_BASE_URL``) is the deployment's and is not checked.

Retries are ours, not the SDK's (it is built with ``max_retries=0``): only this module knows
whether part of an answer was already streamed to the user, which makes a retry unsafe.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import os
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai
from openai.types.chat import ChatCompletionChunk
from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall

from agents.llm.base import DeltaCallback, LLMConfigError, LLMError, LLMProvider, LLMResponse, ToolCall
from fimone import egress

DEFAULT_MAX_RETRIES = 3
DEFAULT_TIMEOUT = 60.0
DEFAULT_RETRY_BASE_DELAY = 0.5
DEFAULT_RETRY_MAX_DELAY = 30.0
JITTER = 0.25
"""Each back-off is stretched by up to this fraction, so agents hitting one rate limit spread out."""

RESERVED_PARAMS = frozenset({"model", "messages", "stream", "tools"})
"""Request fields the provider sets itself; ``params`` may not override them."""

_REASON_LIMIT = 200


OWN_BASE_URL_NEEDS_OWN_KEY = (
    'an agent with its own "base_url" needs its own API key in its secrets ({"api_key": "…"}): '
    "the platform's OPENAI_API_KEY is only sent to the platform's OPENAI_BASE_URL"
)


class _RetryableFailure(Exception):
    """One attempt failed in a way another attempt may not (rate limit, 5xx, network, timeout)."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


@dataclass(slots=True)
class _PartialToolCall:
    """A tool call being assembled from streamed fragments."""

    id: str = ""
    name: str = ""
    argument_parts: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _AttemptState:
    """What one attempt has received so far.

    ``delivered`` turns true once any text went to ``on_delta``: from then on the user has seen
    part of this answer, and a retry would show them a second, different one.
    """

    chunks: int = 0
    content_parts: list[str] = field(default_factory=list)
    tool_calls: dict[int, _PartialToolCall] = field(default_factory=dict)
    delivered: bool = False

    def add_tool_call_deltas(self, deltas: list[ChoiceDeltaToolCall]) -> None:
        """Merge fragments by ``index``, the only field the wire format promises on every chunk."""
        for delta in deltas:
            partial = self.tool_calls.setdefault(delta.index, _PartialToolCall())
            # Some compatible servers repeat id and name on every chunk; OpenAI sends them once.
            # Taking the first non-empty value works for both, where concatenating would not.
            if delta.id and not partial.id:
                partial.id = delta.id
            if delta.function is None:
                continue
            if delta.function.name and not partial.name:
                partial.name = delta.function.name
            if delta.function.arguments:
                partial.argument_parts.append(delta.function.arguments)

    def response(self) -> LLMResponse:
        """The finished answer.

        Raises :class:`LLMError` when the stream held no chunk at all (a server ignoring
        ``stream=true`` answers with one JSON body, which would otherwise read as an empty
        answer) or a tool call came without a name.
        """
        if self.chunks == 0:
            raise LLMError("the model service sent no streamed chunks (does it support stream=true?)")
        calls = [_finish_tool_call(index, self.tool_calls[index]) for index in sorted(self.tool_calls)]
        return LLMResponse(content="".join(self.content_parts), tool_calls=calls)


def _finish_tool_call(index: int, partial: _PartialToolCall) -> ToolCall:
    if not partial.name:
        raise LLMError(f"the model service sent a tool call without a function name (call #{index})")
    raw = "".join(partial.argument_parts)
    # Servers without an id would leave the tool's result unaddressable in the next request.
    return ToolCall(
        id=partial.id or f"call_{index}",
        name=partial.name,
        arguments=parse_arguments(raw),
        raw_arguments=raw,
    )


def parse_arguments(raw: str) -> dict[str, Any] | None:
    """Parse a tool call's argument text: a dict, or ``None`` when it is not a JSON object.

    Empty text counts as ``{}``: some servers send nothing at all for a function without
    parameters.
    """
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class OpenAICompatibleProvider(LLMProvider):
    """Streams one chat completion per :meth:`complete`, with bounded retries of its own."""

    name = "openai"

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None = None,
        params: Mapping[str, Any] | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: float = DEFAULT_TIMEOUT,
        retry_base_delay: float = DEFAULT_RETRY_BASE_DELAY,
        retry_max_delay: float = DEFAULT_RETRY_MAX_DELAY,
        environment_endpoint: bool = False,
    ) -> None:
        """Keep the settings; raises :class:`LLMConfigError` if ``api_key`` is empty.

        ``timeout`` bounds connecting and each wait for data, not the whole stream, so a long
        answer that keeps flowing is never cut off. ``environment_endpoint`` says that
        ``base_url`` is the platform's own (``OPENAI_BASE_URL``); any other explicit ``base_url``
        gets ``api_key`` and nothing else the SDK would read from the environment.
        """
        if not api_key:
            raise LLMConfigError("the openai provider needs an API key")
        self.model = model
        self.base_url = base_url
        self.params = dict(params or {})
        self.max_retries = max_retries
        self.timeout = timeout
        self.retry_base_delay = retry_base_delay
        self.retry_max_delay = retry_max_delay
        self._api_key = api_key
        self._isolated = base_url is not None and not environment_endpoint

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> OpenAICompatibleProvider:
        """Build from ``model_config_json``; raises :class:`LLMConfigError` for unusable values."""
        model = config.get("model")
        if not isinstance(model, str) or not model:
            raise LLMConfigError('the openai provider needs "model"')
        check_credentials(config)
        own_base_url = _optional_str(config, "base_url") or None
        return cls(
            model=model,
            api_key=_api_key(config),
            base_url=own_base_url or os.environ.get("OPENAI_BASE_URL") or None,
            environment_endpoint=own_base_url is None,
            params=_params(config),
            max_retries=_count(config, "max_retries", DEFAULT_MAX_RETRIES),
            timeout=_seconds(config, "timeout", DEFAULT_TIMEOUT, allow_zero=False),
            retry_base_delay=_seconds(config, "retry_base_delay", DEFAULT_RETRY_BASE_DELAY),
            retry_max_delay=_seconds(config, "retry_max_delay", DEFAULT_RETRY_MAX_DELAY),
        )

    def __repr__(self) -> str:
        # Written out so the API key can never reach a log line through repr().
        return f"OpenAICompatibleProvider(model={self.model!r}, base_url={self.base_url!r})"

    async def complete(
        self,
        *,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_delta: DeltaCallback | None = None,
    ) -> LLMResponse:
        """Stream one completion, calling ``await on_delta(text)`` for each piece of content.

        Rate limits (429), server errors (5xx), timeouts and connection failures are retried
        up to ``max_retries`` times with exponential back-off (or the server's ``Retry-After``,
        capped at ``retry_max_delay``). An attempt is **not** retried once it has delivered text
        to ``on_delta``: the user has already seen part of that answer, so the failure is raised
        as :class:`LLMError` instead. Other rejections (400, 401, 403, 404, …) raise
        :class:`LLMError` at once. Exceptions raised by ``on_delta`` itself propagate unchanged.
        """
        # One client per call, shared by its attempts: callers may run each agent step under its
        # own event loop (asyncio.run in a worker), and pooled connections cannot outlive a loop.
        async with self._client() as client:
            attempts = self.max_retries + 1
            for attempt in range(1, attempts + 1):
                try:
                    return await self._attempt(client, messages, tools, on_delta)
                except _RetryableFailure as failure:
                    if attempt == attempts:
                        raise LLMError(
                            f"the model service failed after {attempts} attempts: {failure.reason}"
                        ) from None
                    await asyncio.sleep(self._backoff(attempt, failure.retry_after))
        raise AssertionError("unreachable: the loop returns or raises")

    def _client(self) -> openai.AsyncOpenAI:
        # The key we were given is the one sent: an explicit Authorization header wins over one the
        # SDK would take from OPENAI_CUSTOM_HEADERS.
        headers: dict[str, Any] = {"Authorization": f"Bearer {self._api_key}"}
        if self._isolated:
            # Someone else's endpoint: none of the other headers the SDK reads from the
            # environment (OPENAI_CUSTOM_HEADERS, OPENAI_ORG_ID, OPENAI_PROJECT_ID) goes there.
            headers.update((name, openai.Omit()) for name in _environment_header_names())
        # max_retries=0: the SDK cannot know whether text already reached the user (see complete).
        client = openai.AsyncOpenAI(
            api_key=self._api_key,
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=0,
            default_headers=headers,
            # An address an operator typed is checked and pinned (fimone.egress); the platform's own
            # endpoint keeps the SDK's default client.
            http_client=(
                openai.DefaultAsyncHttpxClient(transport=egress.async_transport(httpx2))
                if self._isolated
                else None
            ),
        )
        if self._isolated:
            client.organization = None
            client.project = None
        return client

    async def _attempt(
        self,
        client: openai.AsyncOpenAI,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_delta: DeltaCallback | None,
    ) -> LLMResponse:
        """One request. Raises :class:`_RetryableFailure` only while nothing was delivered."""
        state = _AttemptState()
        failure: Exception | None = None
        try:
            stream = await client.chat.completions.create(**self._request(messages, tools))
            async with stream:
                async for chunk in stream:
                    await _consume(chunk, state, on_delta)
        except openai.APIError as exc:
            failure = self._failure_for(exc, delivered=state.delivered)
        except egress.EgressRefused as exc:
            failure = LLMError(str(exc))  # never retried: the address stays refused
        if failure is not None:
            # Raised outside the except block so the SDK's error is not chained as __context__:
            # its text may quote the server's reply, and servers echo (parts of) API keys.
            raise failure
        return state.response()

    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        request: dict[str, Any] = {"model": self.model, "messages": messages, "stream": True}
        if tools:
            # An empty list is rejected by some servers; absence means "no tools" everywhere.
            request["tools"] = tools
        if self.params:
            # Verbatim in the body rather than as SDK keyword arguments: compatible servers take
            # knobs the SDK does not know (top_k, repetition_penalty, …) and would raise TypeError.
            request["extra_body"] = self.params
        return request

    def _failure_for(self, exc: openai.APIError, *, delivered: bool) -> Exception:
        """The exception to raise for an SDK error: :class:`_RetryableFailure` or :class:`LLMError`."""
        retryable = _retryable_reason(exc)
        if retryable is None:
            return LLMError(self._rejection_message(exc))
        if delivered:
            return LLMError(
                f"the model service failed part-way through its answer ({retryable.reason}); "
                "not retried because part of the answer was already shown"
            )
        return retryable

    def _rejection_message(self, exc: openai.APIError) -> str:
        status = exc.status_code if isinstance(exc, openai.APIStatusError) else None
        detail = self._redact(_server_message(exc))
        suffix = f": {detail}" if detail else ""
        if status == 401:
            # The server's own 401 text often quotes part of the key, so it is left out.
            return "the model service rejected the API key (401)"
        if status == 403:
            return f"the model service refused access with this API key (403){suffix}"
        if status == 404:
            return f"the model service has no model {self.model!r} or the base URL is wrong (404){suffix}"
        if status is not None:
            return f"the model service rejected the request ({status}){suffix}"
        return f"the model service reported an error{suffix}"

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "***")[:_REASON_LIMIT]

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        if retry_after is not None:
            return min(retry_after, self.retry_max_delay)
        delay = self.retry_base_delay * 2 ** (attempt - 1)
        return min(delay * (1 + random.uniform(0, JITTER)), self.retry_max_delay)


async def _consume(chunk: ChatCompletionChunk, state: _AttemptState, on_delta: DeltaCallback | None) -> None:
    """Fold one streamed chunk into ``state``, passing its text on as it arrives."""
    state.chunks += 1
    # Only the first choice is ours (we never ask for n > 1); a usage-only chunk has none.
    if not chunk.choices:
        return
    delta = chunk.choices[0].delta
    if delta.content:
        state.content_parts.append(delta.content)
        if on_delta is not None:
            state.delivered = True
            await on_delta(delta.content)
    if delta.tool_calls:
        state.add_tool_call_deltas(delta.tool_calls)


def _retryable_reason(exc: openai.APIError) -> _RetryableFailure | None:
    """The failure to retry for ``exc``, or ``None`` when retrying cannot help."""
    # APITimeoutError is a subclass of APIConnectionError, so it must be checked first.
    if isinstance(exc, openai.APITimeoutError):
        return _RetryableFailure("the request timed out")
    if isinstance(exc, openai.APIConnectionError):
        return _RetryableFailure("could not connect to the model service")
    if not isinstance(exc, openai.APIStatusError):
        return None
    status = exc.status_code
    # 408 is the server timing out waiting for us: as transient as our own timeout.
    if status == 429 or status == 408 or status >= 500:
        label = {429: "rate limited", 408: "the server timed out"}.get(status, "server error")
        return _RetryableFailure(f"{label} ({status})", _retry_after_seconds(exc.response.headers))
    return None


def _retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The server's requested wait, from ``retry-after-ms`` or ``Retry-After`` (seconds or date)."""
    milliseconds = _non_negative_float(headers.get("retry-after-ms"))
    if milliseconds is not None:
        return milliseconds / 1000
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _non_negative_float(value)
    if seconds is not None:
        return seconds
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - time.time())


def _non_negative_float(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _server_message(exc: openai.APIError) -> str:
    """The server's own explanation, if it gave one (the SDK unwraps ``{"error": {…}}``)."""
    body = exc.body
    if isinstance(body, Mapping):
        message = body.get("message")
        return message.strip() if isinstance(message, str) else ""
    return body.strip() if isinstance(body, str) else ""


def check_credentials(config: Mapping[str, Any]) -> None:
    """Raise :class:`LLMConfigError` when ``config`` names its own ``base_url`` without its own
    ``api_key`` (``config`` as :meth:`Agent.provider_config` builds it, the secret key merged in).

    The platform's key would otherwise be the one sent there: whoever may edit an agent could
    point it at a server of theirs and read the key from the ``Authorization`` header.
    """
    if _optional_str(config, "base_url") and not _optional_str(config, "api_key"):
        raise LLMConfigError(OWN_BASE_URL_NEEDS_OWN_KEY)


def _environment_header_names() -> list[str]:
    """The header names the SDK would add from ``OPENAI_CUSTOM_HEADERS`` (one ``Name: value`` a
    line), Authorization excepted: the caller sets that one itself."""
    lines = os.environ.get("OPENAI_CUSTOM_HEADERS", "").split("\n")
    names = (line.split(":", 1)[0].strip() for line in lines if ":" in line)
    return [name for name in names if name and name.lower() != "authorization"]


def _api_key(config: Mapping[str, Any]) -> str:
    # check_credentials ran first: the environment's key is only ever taken for its own endpoint.
    key = _optional_str(config, "api_key") or os.environ.get("OPENAI_API_KEY", "")
    if not key:
        raise LLMConfigError(
            'the openai provider needs an API key: set "api_key" in the model config '
            "or the OPENAI_API_KEY environment variable"
        )
    return key


def _optional_str(config: Mapping[str, Any], key: str) -> str | None:
    value = config.get(key)
    if value is not None and not isinstance(value, str):
        raise LLMConfigError(f"{key} must be a string")
    return value


def _params(config: Mapping[str, Any]) -> dict[str, Any]:
    params = config.get("params", {})
    if not isinstance(params, dict):
        raise LLMConfigError("params must be an object")
    reserved = sorted(RESERVED_PARAMS & set(params))
    if reserved:
        raise LLMConfigError(f"params may not set {', '.join(reserved)}: the provider sets them itself")
    return params


def _count(config: Mapping[str, Any], key: str, default: int) -> int:
    value = config.get(key, default)
    # bool is an int in Python, but "max_retries": true is a mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise LLMConfigError(f"{key} must be a whole number >= 0")
    return value


def _seconds(config: Mapping[str, Any], key: str, default: float, *, allow_zero: bool = True) -> float:
    value = config.get(key, default)
    valid = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and (value >= 0 if allow_zero else value > 0)
    )
    if not valid:
        bound = ">= 0" if allow_zero else "> 0"
        raise LLMConfigError(f"{key} must be a number of seconds {bound}")
    return float(value)
