"""HTTP connector actions as tools: one :class:`HttpActionTool` per :class:`ConnectorAction`.

Contract of :meth:`HttpActionTool.run`:

* ``{name}`` placeholders of the action's ``path_template`` are filled from the arguments of the
  same name, URL-quoted (a ``/`` in a value cannot reach another path); a placeholder without an
  argument is a :class:`ToolError` and no request is sent.
* The request never leaves the connector's base URL (its scheme, host, port and path): a value
  that is or hides a dot segment (``..``, ``.``, ``%2e%2e``, ``.%2E``, ``..%2Fx``, …), a value that
  leaves a path segment empty, and a final URL (as it will be sent, dot segments resolved) outside
  the base are refused with a :class:`ToolError` before anything is sent: servers and proxies
  resolve ``/base/items/..`` to ``/base``, and the connector's credentials go with the request.
* The remaining arguments (``None`` values dropped) go to the query string for GET and DELETE and
  to a JSON object body for POST, PUT and PATCH.
* The connector's decrypted ``secrets["headers"]`` are sent with every request.
* The service's host must resolve to a public address, or one ``EGRESS_ALLOW`` lists
  (:mod:`fimone.egress`): anything else is a :class:`ToolError` before anything is sent.
* A 2xx answer returns its parsed JSON when the response says it is JSON, else its text cut at
  :data:`MAX_TEXT_CHARS`; an empty body returns ``{"status": <code>}``.
* Anything else — a non-2xx answer, a timeout, a refused connection, a malformed URL — raises a
  :class:`ToolError` whose text is the observation the model reads; ``run`` never raises
  anything else for a network failure. That text never holds a credential: the secret header
  values (a service echoing them in its error body included) and the password of a base URL's
  ``user:pass@`` are masked (:mod:`agents.tools.redaction`).
"""

from __future__ import annotations

import asyncio
import json
import re
import unicodedata
from typing import Any
from urllib.parse import quote, unquote

import httpx

from agents.models import WRITE_METHODS, Connector, ConnectorAction
from agents.tools.base import Tool, ToolError, ToolSpec
from agents.tools.redaction import dsn_secrets, redact_credentials
from agents.tools.schema import EMPTY_OBJECT_SCHEMA
from fimone import egress

PLACEHOLDER_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
MAX_RESPONSE_BYTES = 1_000_000
"""Bytes read from a response at most; a service streaming more is cut off, not buffered whole."""
MAX_TEXT_CHARS = 20_000
"""Characters of a non-JSON answer handed to the model (a whole web page would drown it)."""
ERROR_EXCERPT_CHARS = 300
DOT_SEGMENTS = frozenset({".", ".."})
_SEPARATORS_RE = re.compile(r"[/\\]")
"""What servers may split a decoded value on: ``/``, and ``\\`` on Windows-minded ones."""
_DECODE_ROUNDS = 4
"""Percent-decoding rounds when looking for hidden dot segments (``%252e`` is ``%2e`` once decoded)."""
_DEFAULT_PORTS = {"http": 80, "https": 443}


class HttpActionTool(Tool):
    """A connector action called over HTTP.

    Everything the call needs (URL, method, headers, timeout) is copied from the models when the
    tool is built, so :meth:`run` touches no database and can run in any event loop.
    """

    def __init__(self, *, action: ConnectorAction, connector: Connector | None = None) -> None:
        connector = connector or action.connector
        self.spec = ToolSpec(
            name=f"{connector.slug}__{action.name}",
            description=action.description or f"{action.method} {action.path_template or '/'}",
            parameters=action.parameters_schema or dict(EMPTY_OBJECT_SCHEMA),
            # The model's save() fills both from the method; an unsaved action may still hold None.
            requires_confirmation=bool(action.requires_confirmation),
            is_write=bool(action.is_write),
            title=action.title,
        )
        self.method = str(action.method).upper()
        self.path_template = action.path_template or ""
        self.base_url = connector.base_url
        self.timeout = float(connector.timeout_seconds)
        self._headers = _secret_headers(connector.secrets)
        self._secrets = [*_header_secrets(self._headers), *dsn_secrets(self.base_url, whole=False)]

    @property
    def reads_only(self) -> bool:
        return not (self.spec.is_write or self.spec.requires_confirmation or self.method in WRITE_METHODS)

    def __repr__(self) -> str:
        # Deliberately without the headers and the base URL's password: reprs end up in logs.
        return f"<HttpActionTool {self.name} {self.method} {redact_credentials(self.base_url)}>"

    async def run(self, args: dict[str, Any]) -> Any:
        try:
            return await self._call(args)
        except ToolError as exc:
            raise ToolError(redact_credentials(str(exc), secrets=self._secrets)) from None

    async def _call(self, args: dict[str, Any]) -> Any:
        path, rest = self._fill_path(args)
        url = _join_url(self.base_url, path)
        _check_under_base(url, self.base_url, where=f"{self.method} {path or '/'}")
        rest = {key: value for key, value in rest.items() if value is not None}
        request_kwargs: dict[str, Any] = (
            {"json": rest} if self.method in BODY_METHODS else {"params": _query_params(rest)}
        )
        where = f"{self.method} {path or '/'}"
        try:
            # httpx's timeout bounds each phase (connect, each read, …); asyncio.timeout bounds the
            # whole call, so a service dripping one byte at a time cannot hold the run forever.
            async with asyncio.timeout(self.timeout):
                status, content_type, body = await self._send(url, request_kwargs)
        except (TimeoutError, httpx.TimeoutException):
            raise ToolError(f"{where} timed out after {self.timeout:g}s") from None
        except egress.EgressRefused as exc:
            raise ToolError(f"{where}: {exc}; nothing was sent") from None
        except httpx.ConnectError as exc:
            raise ToolError(f"{where}: could not connect to the service ({_reason(exc)})") from None
        except httpx.TransportError as exc:
            raise ToolError(f"{where}: the request failed ({_reason(exc)})") from None
        except httpx.InvalidURL as exc:
            raise ToolError(f"{where}: the connector's URL is not valid ({exc})") from None
        if not 200 <= status < 300:
            raise ToolError(f"{where} answered {status}: {_excerpt(body)}")
        return _parse_body(status, content_type, body)

    def _fill_path(self, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The path with its placeholders filled, and the arguments that were not used for it.

        Raises :class:`ToolError` for a missing argument, a value that is or hides a dot segment,
        and a value that leaves a segment of the path empty (``/purchases/{id}`` with ``id=""``
        would name the collection instead of one purchase).
        """
        names = PLACEHOLDER_RE.findall(self.path_template)
        missing = [name for name in names if args.get(name) is None]
        if missing:
            raise ToolError(f"missing argument(s) for the path {self.path_template!r}: {', '.join(missing)}")

        def fill_query(match: re.Match[str]) -> str:
            return quote(_as_text(args[match.group(1)]), safe="")

        def fill(match: re.Match[str]) -> str:
            name = match.group(1)
            text = _as_text(args[name])
            if _hides_dot_segment(text):
                raise ToolError(
                    f"refused: the argument {name!r} ({text[:40]!r}) is or contains a '.' or '..' path "
                    f"segment, which would leave the path {self.path_template!r}; nothing was sent"
                )
            # safe="" so that "a/b" or "x?y" stays one path segment instead of escaping it.
            return quote(text, safe="")

        path_part, sep, query_part = self.path_template.partition("?")
        segments = []
        for segment in path_part.split("/"):
            filled = PLACEHOLDER_RE.sub(fill, segment)
            if PLACEHOLDER_RE.search(segment) and (filled == "" or _hides_dot_segment(filled)):
                # Each value passed, but together with the template they empty the segment or
                # make it a dot segment ("{a}." with a="" is ".").
                named = ", ".join(repr(name) for name in PLACEHOLDER_RE.findall(segment))
                raise ToolError(
                    f"refused: the argument(s) {named} would make a segment of the path "
                    f"{self.path_template!r} {'empty' if filled == '' else repr(filled)}, which "
                    "reaches another resource; nothing was sent"
                )
            segments.append(filled)
        # A template's own query (``items?id={id}``) is no path: a dot there reaches nothing.
        path = "/".join(segments) + sep + PLACEHOLDER_RE.sub(fill_query, query_part)
        used = set(names)
        return path, {key: value for key, value in args.items() if key not in used}

    async def _send(self, url: str, request_kwargs: dict[str, Any]) -> tuple[int, str, bytes]:
        # A client per call, not a shared one: an AsyncClient's connection pool is bound to the
        # event loop that first used it, and runs execute in different loops and threads (embedded
        # executor threads, Celery tasks, tests). A per-loop cache would need closing when each loop
        # ends, which nothing here observes; one TCP handshake per call is negligible next to the
        # model round trip around every tool call.
        # Redirects are not followed: a 3xx could send the secret headers to another host. The
        # egress transport connects only to an address it checked (fimone.egress).
        async with (
            httpx.AsyncClient(
                headers=self._headers,
                timeout=self.timeout,
                follow_redirects=False,
                transport=egress.async_transport(),
            ) as client,
            client.stream(self.method, url, **request_kwargs) as response,
        ):
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body.extend(chunk)
                if len(body) > MAX_RESPONSE_BYTES:
                    del body[MAX_RESPONSE_BYTES:]
                    break
            return response.status_code, response.headers.get("content-type", ""), bytes(body)


def _secret_headers(secrets: Any) -> dict[str, str]:
    headers = (secrets or {}).get("headers") if isinstance(secrets, dict) else None
    if not isinstance(headers, dict):
        return {}
    return {str(name): _as_text(value) for name, value in headers.items() if value is not None}


def _hides_dot_segment(text: str) -> bool:
    """Whether ``text``, decoded the way a server or a proxy in front of it might, is a dot
    segment or holds one between slashes (``..``, ``%2e%2e``, ``.%2E``, ``..%2Fx``, fullwidth full stops)."""
    for _ in range(_DECODE_ROUNDS):
        decoded = unquote(text)
        if decoded == text:
            break
        text = decoded
    # NFKC folds look-alikes some servers normalise: the fullwidth full stop becomes ".".
    pieces = _SEPARATORS_RE.split(unicodedata.normalize("NFKC", text))
    return any(piece.strip() in DOT_SEGMENTS for piece in pieces)


def _check_under_base(url: str, base_url: str, *, where: str) -> None:
    """Raise :class:`ToolError` unless ``url``, as httpx will send it (dot segments resolved), has
    the base URL's scheme, host and port and a path at or under the base URL's path."""
    try:
        sent, base = httpx.URL(url), httpx.URL(base_url)
    except httpx.InvalidURL as exc:
        raise ToolError(f"{where}: the connector's URL is not valid ({exc})") from None
    sent_path, base_path = _raw_path(sent), _raw_path(base).rstrip("/")
    same_origin = (sent.scheme, sent.host, _port(sent)) == (base.scheme, base.host, _port(base))
    under = sent_path == base_path or sent_path.startswith(base_path + "/")
    # Dot segments left in the path are percent-encoded ones: servers may still resolve them.
    hidden = any(_hides_dot_segment(segment) for segment in sent_path.split("/") if segment)
    if not same_origin or not under or hidden:
        raise ToolError(
            f"refused: {where} would reach {sent_path or '/'!r}, outside the connector's base URL "
            f"(path {base_path or '/'!r}); nothing was sent"
        )


def _raw_path(url: httpx.URL) -> str:
    return url.raw_path.decode("ascii", errors="replace").partition("?")[0]


def _port(url: httpx.URL) -> int | None:
    return url.port if url.port is not None else _DEFAULT_PORTS.get(url.scheme)


def _header_secrets(headers: dict[str, str]) -> list[str]:
    """Each header value, and the credential of an ``<scheme> <credential>`` value on its own
    (a service may echo just the token of ``Bearer <token>``)."""
    found: list[str] = []
    for value in headers.values():
        found.append(value)
        scheme, _, credential = value.partition(" ")
        if scheme and credential.strip():
            found.append(credential.strip())
    return found


def _join_url(base_url: str, path: str) -> str:
    # Not urljoin: it drops the base's last segment when the base lacks a trailing slash and
    # replaces the whole path when ``path`` starts with one; operators expect plain concatenation.
    if not path:
        return base_url
    return f"{base_url.rstrip('/')}/{path.lstrip('/')}"


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _query_params(args: dict[str, Any]) -> list[tuple[str, str]]:
    params: list[tuple[str, str]] = []
    for key, value in args.items():
        # A list becomes a repeated key (?tag=a&tag=b), the common convention of web services.
        values = value if isinstance(value, list) else [value]
        params.extend((key, _as_text(item)) for item in values if item is not None)
    return params


def _decode(body: bytes) -> str:
    return body.decode("utf-8", errors="replace")


def _excerpt(body: bytes) -> str:
    text = " ".join(_decode(body[: ERROR_EXCERPT_CHARS * 4]).split())
    if not text:
        return "(empty body)"
    return text if len(text) <= ERROR_EXCERPT_CHARS else text[:ERROR_EXCERPT_CHARS] + "…"


def _parse_body(status: int, content_type: str, body: bytes) -> Any:
    if not body.strip():
        return {"status": status}
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type == "application/json" or media_type.endswith("+json"):
        try:
            return json.loads(body)
        except ValueError:
            pass  # a service mislabelling its body: hand the model the text instead
    text = _decode(body)
    if len(text) > MAX_TEXT_CHARS or len(body) >= MAX_RESPONSE_BYTES:
        return text[:MAX_TEXT_CHARS] + f"\n… [cut: the answer was longer than {MAX_TEXT_CHARS} characters]"
    return text


def _reason(exc: Exception) -> str:
    return str(exc) or type(exc).__name__
