"""The one error a service raises to refuse a request, shared by every app."""

from __future__ import annotations


class ServiceError(Exception):
    """A request the service refuses. ``code`` maps to an HTTP status in the API layer
    (``throttled``: 429, with ``retry_after`` seconds)."""

    def __init__(
        self, message: str, *, code: str = "invalid", field: str | None = None, retry_after: int | None = None
    ) -> None:
        super().__init__(message)
        self.message, self.code, self.field = message, code, field
        self.retry_after = retry_after
