"""Sign-in is throttled per account and per address (django-axes): past the limit a sign-in is
refused with a clear 429 page, even with the right password, until the cool-off has passed."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.test import Client

from tests.fimone.asgi_kit import InPlaceAsyncClient
from tests.personas import PASSWORD

APPROVALS_LOGIN = "/approvals/login/"
ADMIN_LOGIN = "/admin/login/"
PORTAL_LOGIN = "/login/"
LIMIT = settings.AXES_FAILURE_LIMIT


def sign_in(client: Client, page: str, username: str, password: str, address: str) -> Any:
    return client.post(page, {"username": username, "password": password}, REMOTE_ADDR=address)


def assert_locked_out(response: Any) -> None:
    assert response.status_code == 429
    page = response.content.decode()
    assert "Too many sign-in attempts" in page and "Traceback" not in page
    assert PASSWORD not in page and "wrong-password" not in page
    assert int(response["Retry-After"]) == settings.AXES_COOLOFF_TIME.total_seconds()


def assert_signed_in(client: Client, response: Any) -> None:
    assert response.status_code == 302, response.content.decode()[:500]
    assert "_auth_user_id" in client.session


@pytest.mark.parametrize(
    ("page", "who"), [(APPROVALS_LOGIN, "approver"), (ADMIN_LOGIN, "admin"), (PORTAL_LOGIN, "member")]
)
def test_it_refuses_the_right_password_after_200_wrong_ones_for_the_account(
    personas, page: str, who: str
) -> None:
    user = getattr(personas, who)
    client = Client()
    for attempt in range(200):  # each from another address: only the account's count can lock
        sign_in(client, page, user.username, f"wrong-password-{attempt}", f"10.0.0.{attempt}")

    response = sign_in(client, page, user.username, PASSWORD, "192.0.2.1")

    assert_locked_out(response)
    assert "_auth_user_id" not in client.session


def test_it_locks_out_an_address_spreading_failures_over_many_usernames(personas) -> None:
    client = Client()
    for number in range(LIMIT):
        sign_in(client, APPROVALS_LOGIN, f"someone-{number}", "wrong-password", "198.51.100.7")

    assert_locked_out(sign_in(client, APPROVALS_LOGIN, "april", PASSWORD, "198.51.100.7"))
    elsewhere = Client()
    assert_signed_in(elsewhere, sign_in(elsewhere, APPROVALS_LOGIN, "april", PASSWORD, "198.51.100.8"))


def test_it_lets_a_user_in_below_the_limit(personas) -> None:
    client = Client()
    for _ in range(LIMIT - 1):
        response = sign_in(client, APPROVALS_LOGIN, "april", "wrong-password", "203.0.113.5")
        assert response.status_code == 200 and "enter a correct username and password" in response.text

    assert_signed_in(client, sign_in(client, APPROVALS_LOGIN, "april", PASSWORD, "203.0.113.5"))


def test_it_lets_a_user_in_again_after_the_cool_off(personas) -> None:
    client = Client()
    for _ in range(LIMIT):
        sign_in(client, APPROVALS_LOGIN, "april", "wrong-password", "203.0.113.9")
    assert_locked_out(sign_in(client, APPROVALS_LOGIN, "april", PASSWORD, "203.0.113.9"))

    past = dt.timedelta(minutes=1) + settings.AXES_COOLOFF_TIME
    for attempt in AccessAttempt.objects.all():  # the cool-off runs from the last failure
        AccessAttempt.objects.filter(pk=attempt.pk).update(attempt_time=attempt.attempt_time - past)

    assert_signed_in(client, sign_in(client, APPROVALS_LOGIN, "april", PASSWORD, "203.0.113.9"))


def test_it_takes_the_address_from_a_proxy_header_only_when_configured(personas, settings) -> None:
    client = Client()
    for number in range(LIMIT):  # one address, claiming a different one each time
        client.post(
            APPROVALS_LOGIN,
            {"username": f"someone-{number}", "password": "wrong-password"},
            REMOTE_ADDR="198.51.100.20",
            HTTP_X_FORWARDED_FOR=f"10.9.9.{number}",
        )
    assert_locked_out(sign_in(client, APPROVALS_LOGIN, "april", PASSWORD, "198.51.100.20"))

    settings.CLIENT_IP_HEADER = "HTTP_X_FORWARDED_FOR"  # behind a proxy that appends the peer
    behind_proxy = Client()
    response = behind_proxy.post(
        APPROVALS_LOGIN,
        {"username": "april", "password": PASSWORD},
        REMOTE_ADDR="198.51.100.20",  # the proxy
        HTTP_X_FORWARDED_FOR="198.51.100.20, 203.0.113.77",  # a forged entry, then the real client
    )
    assert_signed_in(behind_proxy, response)


@pytest.mark.django_db(transaction=True)
async def test_it_answers_a_locked_out_sign_in_with_its_page_over_asgi(personas) -> None:
    client = InPlaceAsyncClient()
    for _ in range(LIMIT):
        await client.post(APPROVALS_LOGIN, {"username": "april", "password": "wrong-password"})

    response = await client.post(APPROVALS_LOGIN, {"username": "april", "password": PASSWORD})

    assert_locked_out(response)
    assert re.search(r"Try again in 15 minutes", response.content.decode())


def test_a_stranger_behind_a_shared_address_does_not_lock_out_the_colleagues_who_sign_in_from_it(
    personas,
) -> None:
    """An office NAT: april has signed in from its address before. Someone there sprays wrong
    passwords over many usernames: the address is locked for accounts that never signed in from
    it (aude), not for april, whose own account count is untouched."""
    office = "203.0.113.9"
    first = Client()
    assert_signed_in(first, sign_in(first, APPROVALS_LOGIN, "april", PASSWORD, office))
    stranger = Client()
    for number in range(LIMIT * 3):
        sign_in(stranger, APPROVALS_LOGIN, f"someone-{number}", "wrong-password", office)

    again = Client()
    assert_signed_in(again, sign_in(again, APPROVALS_LOGIN, "april", PASSWORD, office))
    assert_locked_out(sign_in(Client(), APPROVALS_LOGIN, "aude", PASSWORD, office))


def test_a_known_address_does_not_spare_an_account_its_own_count(personas) -> None:
    office = "203.0.113.10"
    first = Client()
    assert_signed_in(first, sign_in(first, APPROVALS_LOGIN, "april", PASSWORD, office))
    for attempt in range(LIMIT):
        sign_in(Client(), APPROVALS_LOGIN, "april", f"wrong-password-{attempt}", office)

    assert_locked_out(sign_in(Client(), APPROVALS_LOGIN, "april", PASSWORD, office))
