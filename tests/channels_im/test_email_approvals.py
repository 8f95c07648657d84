"""E-mail approvals (issue 26, item 5), against a real SMTP server process (aiosmtpd): a message
per approver with the call's business fields and two signed links; a link decides only for its
approver, once they prove it is them (signed in, or with the code sent to their own address);
clicked twice, after expiry, forwarded, tampered or by someone who lost the role, it decides
nothing more, and says why."""

from __future__ import annotations

import datetime as dt
import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.test import Client

from agents.models import RunStatus
from approvals.models import ChannelConfig, ConfirmationEvent, ConfirmationStatus
from approvals.services import confirmation_decide, confirmation_expire_due
from channels_im.email import links
from tenancy.models import Membership, Role
from tests.admin_kit import logged_in, page_text, url
from tests.agents.engine_kit import Harness
from tests.approvals.kit import pay_tool, set_policy, suspended_run
from tests.approvals.stage_kit import parked_payment, two_stage_policy
from tests.channels_im.smtp_kit import SmtpServer, text_of

pytestmark = pytest.mark.django_db(transaction=True)

Kind = ConfirmationEvent.Kind
LINK = re.compile(r"^(Approve|Reject):\s+(http\S+)$", re.M)


@pytest.fixture
def smtp(tmp_path, settings) -> Iterator[SmtpServer]:
    with SmtpServer(tmp_path / "mail") as server:
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", server.port
        settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
        settings.EMAIL_USE_TLS = False
        settings.SITE_URL = "http://testserver"
        yield server


@pytest.fixture
def by_email(personas) -> ChannelConfig:
    for user, address in ((personas.approver, "april@acme.test"), (personas.admin, "adam@acme.test")):
        user.email = address
        user.save()
    return ChannelConfig.objects.create(
        organization=personas.org,
        kind="email",
        name="Approvals by e-mail",
        is_default=True,
        settings_json={"from": "Approvals <approvals@acme.test>"},
    )


def links_in(message: Any) -> dict[str, str]:
    return {
        verb.lower(): url.removeprefix("http://testserver") for verb, url in LINK.findall(text_of(message))
    }


def code_in(message: Any) -> str:
    return re.search(r"Your code: (\d{6})", str(message["Subject"])).group(1)


def approve_with_code(client: Client, smtp: SmtpServer, url: str, *, reason: str = "") -> Any:
    """Open the link, ask for a code, read it from the approver's mailbox, decide with it."""
    assert client.get(url).status_code == 200
    client.post(url, {"action": "code"})
    code = code_in(smtp.to("april@acme.test")[-1])
    return client.post(url, {"action": "decide", "code": code, "reason": reason})


def test_each_approver_gets_a_message_with_the_business_fields_and_their_own_links(
    personas, resumes, smtp, by_email
) -> None:
    set_policy(personas)
    _, request = suspended_run(personas, Harness(pay_tool()))

    april, adam = smtp.to("april@acme.test"), smtp.to("adam@acme.test")

    assert len(april) == 1 and len(adam) == 1
    assert april[0]["From"] == "Approvals <approvals@acme.test>"
    assert april[0]["Subject"] == "Approval needed: Purchase pay for alice (Procurement assistant)"
    body = text_of(april[0])
    assert "PO-1001" in body and "1,250.50" in body
    assert links_in(april[0]).keys() == {"approve", "reject"}
    assert links_in(april[0])["approve"] != links_in(adam[0])["approve"], "each approver their own links"
    request.refresh_from_db()
    assert request.channel == "email" and request.events.filter(kind=Kind.DELIVERED).exists()


def test_opening_a_link_decides_nothing_and_the_code_sent_to_the_approver_does(
    personas, resumes, smtp, by_email
) -> None:
    set_policy(personas)
    harness = Harness(pay_tool())
    run, request = suspended_run(personas, harness)
    url = links_in(smtp.to("april@acme.test")[0])["approve"]
    client = Client()

    page = client.get(url)
    request.refresh_from_db()
    assert page.status_code == 200 and request.status == ConfirmationStatus.PENDING
    assert "we send a one-time code to a***@acme.test" in page.content.decode()

    answer = approve_with_code(client, smtp, url, reason="checked")

    assert answer.status_code == 200 and "The request was approved." in answer.content.decode()
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.APPROVED and request.responded_by == personas.approver
    assert request.reason == "checked"
    assert harness.resume(run) == RunStatus.COMPLETED


def test_a_link_clicked_twice_decides_once(personas, resumes, smtp, by_email) -> None:
    set_policy(personas)
    _, request = suspended_run(personas, Harness(pay_tool()))
    url = links_in(smtp.to("april@acme.test")[0])["approve"]
    approve_with_code(Client(), smtp, url)

    again = Client().get(url)

    assert "This request was already approved." in again.content.decode()
    assert request.votes.count() == 1 and request.events.filter(kind=Kind.DECIDED).count() == 1


def test_a_link_after_the_request_expired_decides_nothing(personas, resumes, smtp, by_email) -> None:
    set_policy(personas)
    _, request = suspended_run(personas, Harness(pay_tool()))
    url = links_in(smtp.to("april@acme.test")[0])["reject"]
    confirmation_expire_due(now=request.expires_at + dt.timedelta(seconds=1))

    page = Client().get(url)

    assert "This request was already expired." in page.content.decode()
    assert not request.votes.exists()


def test_a_forwarded_link_decides_nothing_for_its_reader(personas, resumes, smtp, by_email) -> None:
    set_policy(personas)
    _, request = suspended_run(personas, Harness(pay_tool()))
    url = links_in(smtp.to("april@acme.test")[0])["approve"]
    reader = Client()  # whoever april forwarded the message to: no session, no access to her mailbox
    reader.get(url)
    reader.post(url, {"action": "code"})

    guesses = [reader.post(url, {"action": "decide", "code": f"{n:06d}"}) for n in range(6)]

    assert [g.status_code for g in guesses] == [400] * 6
    assert "too many wrong codes" in guesses[-1].content.decode()
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING and not request.votes.exists()
    signed_in = logged_in(personas.admin).post(url, {"action": "decide"})
    assert signed_in.status_code == 403 and "It decides nothing for you" in signed_in.content.decode()
    assert not request.votes.exists()


def test_signed_in_as_the_approver_the_link_decides_without_a_code(personas, resumes, smtp, by_email) -> None:
    set_policy(personas)
    _, request = suspended_run(personas, Harness(pay_tool()))
    url = links_in(smtp.to("april@acme.test")[0])["reject"]

    answer = logged_in(personas.approver).post(url, {"action": "decide", "reason": "not now"})

    assert "The request was rejected." in answer.content.decode()
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.REJECTED and request.reason == "not now"


def test_a_link_rechecks_that_its_approver_may_still_decide(personas, resumes, smtp, by_email) -> None:
    set_policy(personas)
    _, request = suspended_run(personas, Harness(pay_tool()))
    url = links_in(smtp.to("april@acme.test")[0])["approve"]
    Membership.objects.filter(user=personas.approver).update(role=Role.MEMBER)

    answer = approve_with_code(Client(), smtp, url)

    assert answer.status_code == 409 and "You cannot decide this request" in answer.content.decode()
    assert not request.votes.exists()


def test_a_tampered_link_is_not_a_link(personas, resumes, smtp, by_email) -> None:
    set_policy(personas)
    suspended_run(personas, Harness(pay_tool()))
    url = links_in(smtp.to("april@acme.test")[0])["approve"]

    page = Client().get(url[:-3] + ("abc" if not url.endswith("abc/") else "xyz") + "/")

    assert page.status_code == 404 and "This link is not valid" in page.content.decode()


def test_a_staged_request_mails_each_stage_when_it_opens_and_nobody_twice(
    personas, resumes, smtp, by_email
) -> None:
    staff = two_stage_policy(personas, finance_required=1)
    for user in (staff.lee, staff.finn, staff.fiona, staff.fred):
        user.email = f"{user.username}@acme.test"
        user.save()
    _, request = parked_payment(personas, Harness(pay_tool()), 60_000)
    assert [m["To"] for m in smtp.messages()] == ["lee@acme.test"]

    confirmation_decide(request_id=request.pk, user=staff.lee, approve=True)

    assert sorted(m["To"] for m in smtp.messages()[1:]) == [
        "finn@acme.test",
        "fiona@acme.test",
        "fred@acme.test",
    ]
    assert "Stage 2 of 2 — Finance (1 approval): asked now" in text_of(smtp.to("finn@acme.test")[0])


def test_an_admin_sets_up_an_e_mail_channel_and_a_bad_sender_is_refused(personas, superuser) -> None:
    form = {
        "organization": personas.org.pk,
        "kind": "email",
        "name": "Approvals by e-mail",
        "active": "on",
        "is_default": "",
        "secrets": "",
    }
    client = logged_in(superuser)

    bad = client.post(url(ChannelConfig, "add"), {**form, "settings_json": '{"from": "not an address"}'})
    good = client.post(
        url(ChannelConfig, "add"), {**form, "settings_json": '{"from": "Approvals <a@acme.test>"}'}
    )

    assert bad.status_code == 200 and "is not an e-mail address" in page_text(bad)
    assert good.status_code == 302, page_text(good)[:2000]
    assert ChannelConfig.objects.get(kind="email").settings_json == {"from": "Approvals <a@acme.test>"}


def test_parallel_wrong_codes_each_count_a_try(personas, resumes, smtp, by_email, monkeypatch) -> None:
    """Guesses sent together, or by several servers on one Redis (each thread here has its own
    cache connection), all read the code before any of them is counted: every one still counts,
    so the code is refused after ``CODE_ATTEMPTS`` whoever counted them."""
    set_policy(personas)
    suspended_run(personas, Harness(pay_tool()))
    token = links_in(smtp.to("april@acme.test")[0])["approve"].removeprefix("/im/email/").strip("/")
    code = links.code_send(token)
    wrong = f"{(int(code) + 1) % 10**links.CODE_DIGITS:0{links.CODE_DIGITS}d}"
    all_read = threading.Barrier(links.CODE_ATTEMPTS)
    shared = links.cache

    class ReadTogether:
        """The cache, where each guess waits for the others once it read the code."""

        def get(self, key: str, default: Any = None) -> Any:
            held = shared.get(key, default)
            all_read.wait(timeout=30)
            return held

        def __getattr__(self, name: str) -> Any:
            return getattr(shared, name)

    monkeypatch.setattr(links, "cache", ReadTogether())
    with ThreadPoolExecutor(links.CODE_ATTEMPTS) as pool:
        answers = list(pool.map(lambda _: links.code_check(token, wrong), range(links.CODE_ATTEMPTS)))
    monkeypatch.setattr(links, "cache", shared)

    assert answers == ["this is not the code we sent"] * links.CODE_ATTEMPTS
    assert links.code_check(token, code) == "too many wrong codes: ask for a new one"


def test_a_link_decides_nothing_after_its_requests_deadline(
    personas, resumes, smtp, by_email, monkeypatch
) -> None:
    """The link carries its request's deadline, signed: past it the link decides nothing, even
    with the right code and while the request's row is still pending (nobody swept it yet)."""
    set_policy(personas, timeout_seconds=300)  # the code outlives the deadline (CODE_SECONDS)
    _, request = suspended_run(personas, Harness(pay_tool()))
    url = links_in(smtp.to("april@acme.test")[0])["approve"]
    client = Client()
    client.get(url)
    client.post(url, {"action": "code"})
    code = code_in(smtp.to("april@acme.test")[-1])
    mailed = len(smtp.messages())

    later = request.expires_at.timestamp() + 1
    monkeypatch.setattr(time, "time", lambda: later)  # the link's reader's clock, past the deadline
    decided = client.post(url, {"action": "decide", "code": code})
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING and not request.votes.exists()
    opened = client.get(url)
    asked = client.post(url, {"action": "code"})

    for answer in (decided, opened, asked):
        assert answer.status_code == 410
        assert "This link has expired: its request's deadline passed." in page_text(answer)
    assert len(smtp.messages()) == mailed, "no code is mailed for a link past its deadline"
