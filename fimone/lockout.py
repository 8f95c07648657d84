"""What a sign-in lockout counts (django-axes' ``AXES_LOCKOUT_PARAMETERS``).

Failures are always counted per account: ``LOGIN_FAILURE_LIMIT`` failures for one username lock
it, wherever they came from. They are also counted per address, so that one address spraying
guesses over many usernames is locked — except for an account that has signed in successfully
from that address before: behind a shared NAT (an office, a campus) every colleague arrives from
the same address, and a stranger's failures there must not lock out the people who work there.
Such an account is still protected by its own count.
"""

from __future__ import annotations

from typing import Any

from axes.models import AccessLog

from fimone.throttling import client_ip


def lockout_parameters(request_or_attempt: Any, credentials: dict[str, Any] | None = None) -> list[str]:
    """``["username"]`` for an account signing in from an address it has signed in from before,
    else ``["username", "ip_address"]`` (each counted on its own)."""
    username = (credentials or {}).get("username") or getattr(request_or_attempt, "username", None)
    address = getattr(request_or_attempt, "axes_ip_address", None) or getattr(
        request_or_attempt, "ip_address", None
    )
    if address is None and hasattr(request_or_attempt, "META"):
        address = client_ip(request_or_attempt)
    if username and address and AccessLog.objects.filter(username=username, ip_address=address).exists():
        return ["username"]
    return ["username", "ip_address"]
