"""The inbox refreshes itself: after a request opens or is settled, the sockets of its approvers
(``ws/inbox/``) are told, and only theirs; the page then re-reads its inbox (``/approvals/live/``)
with the same authorised read as the inbox page."""

from __future__ import annotations

import re
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from agents.engine.store import args_sha256
from agents.services import run_start
from approvals.models import ConfirmationRequest
from approvals.services import confirmation_cancel, confirmation_decide, confirmation_request_open
from fimone.asgi import application
from tenancy.models import Membership
from tests.agents.test_stream import session_cookie
from tests.approvals.kit import PAY_ARGS, paying_agent, set_policy
from tests.personas import make_user

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://127.0.0.1:8000")


def inbox_socket(cookie: str | None) -> WebsocketCommunicator:
    headers = [ORIGIN] + ([(b"cookie", cookie.encode())] if cookie else [])
    return WebsocketCommunicator(application, "/ws/inbox/", headers=headers)


async def drain(ws: WebsocketCommunicator) -> list[dict]:
    received = []
    while not await ws.receive_nothing(timeout=0.3):
        received.append(await ws.receive_json_from())
    return received


def open_request(personas: Any) -> ConfirmationRequest:
    set_policy(personas)
    run = run_start(agent=paying_agent(personas), user=personas.member, input="pay PO-1001")
    return confirmation_request_open(
        run=run,
        tool_call_id="call-1",
        tool_name="oa__purchase_pay",
        tool_args=dict(PAY_ARGS),
        args_sha256=args_sha256(dict(PAY_ARGS)),
    ).request


def listen_while(personas: Any, users: list[Any], action: Any) -> list[list[dict]]:
    """What the inbox sockets of ``users`` receive while ``action()`` runs (in a worker thread,
    as a view would: its after-commit pushes reach the sockets through the channel layer)."""
    cookies = [session_cookie(user) for user in users]

    async def scenario() -> list[list[dict]]:
        sockets = [inbox_socket(cookie) for cookie in cookies]
        for ws in sockets:
            assert (await ws.connect())[0]
        await database_sync_to_async(action)()
        received = [await drain(ws) for ws in sockets]
        for ws in sockets:
            await ws.disconnect()
        return received

    return async_to_sync(scenario)()


def test_the_approvers_inboxes_hear_a_request_open_and_nobody_else_does(personas, resumes) -> None:
    opened: list[ConfirmationRequest] = []
    users = [personas.approver, personas.admin, personas.member, personas.auditor, personas.stranger]

    heard = listen_while(personas, users, lambda: opened.append(open_request(personas)))

    message = {"request_id": str(opened[0].pk), "change": "opened"}
    assert heard[0] == [message] and heard[1] == [message], "april and adam may decide it"
    assert heard[2:] == [[], [], []], "the requester, the auditor and another organisation hear nothing"


@pytest.mark.parametrize("settle", ["approve", "reject", "cancel"])
def test_the_approvers_inboxes_hear_a_request_leave_when_it_is_settled(personas, resumes, settle) -> None:
    request = open_request(personas)

    def act() -> None:
        if settle == "cancel":
            confirmation_cancel(request_id=request.pk, reason="run cancelled")
        else:
            outcome = confirmation_decide(
                request_id=request.pk, user=personas.approver, approve=settle == "approve"
            )
            assert outcome.accepted

    heard = listen_while(personas, [personas.admin, personas.stranger], act)

    assert heard == [[{"request_id": str(request.pk), "change": "settled"}], []]


def test_a_vote_towards_a_quorum_reaches_the_approvers_inboxes_with_the_new_tally(personas, resumes) -> None:
    request = open_request(personas)
    ConfirmationRequest.objects.filter(pk=request.pk).update(approvals_required=2)
    users = [personas.admin, personas.approver, personas.member, personas.stranger]

    def first_vote() -> None:
        assert confirmation_decide(request_id=request.pk, user=personas.approver, approve=True).counted

    heard = listen_while(personas, users, first_vote)

    message = {"request_id": str(request.pk), "change": "voted"}
    assert heard[:2] == [[message], [message]], "adam may still vote; april's inbox drops the card"
    assert heard[2:] == [[], []], "the requester and another organisation hear nothing"
    [card] = live(personas.admin).json()["cards"]
    assert re.search(
        r'<p class="tally">1 of 2 approvals: april approved [0-9: -]+ UTC — waiting for one more</p>',
        card["html"],
    )
    assert live(personas.approver).json() == {"pending": 0, "cards": [], "left": {}}, "april has voted"
    assert live(personas.approver, f"?cards=1&shown={request.pk}").json()["left"] == {
        str(request.pk): "You voted on Purchase pay (PO-1001): it waits for the others' votes."
    }


def test_a_refused_click_pushes_nothing(personas, resumes) -> None:
    request = open_request(personas)

    heard = listen_while(
        personas,
        [personas.approver],
        lambda: confirmation_decide(request_id=request.pk, user=personas.auditor, approve=True),
    )

    assert heard == [[]]


def test_an_approver_who_left_the_organisation_hears_nothing(personas, resumes) -> None:
    Membership.objects.filter(user=personas.admin).delete()
    heard = listen_while(personas, [personas.admin, personas.approver], lambda: open_request(personas))

    assert heard[0] == []
    assert len(heard[1]) == 1


def test_it_refuses_an_inbox_socket_without_a_session(personas) -> None:
    async def scenario() -> tuple[bool, int | None]:
        return await inbox_socket(None).connect()

    assert async_to_sync(scenario)() == (False, 4401)


def test_it_refuses_an_inbox_socket_from_another_origin(personas) -> None:
    cookie = session_cookie(personas.approver)

    async def scenario() -> bool:
        ws = WebsocketCommunicator(
            application,
            "/ws/inbox/",
            headers=[(b"origin", b"https://evil.test"), (b"cookie", cookie.encode())],
        )
        connected, _ = await ws.connect()
        return connected

    assert async_to_sync(scenario)() is False


def test_it_ignores_what_a_client_sends_on_the_inbox_socket(personas) -> None:
    cookie = session_cookie(personas.approver)

    async def scenario() -> list[dict]:
        ws = inbox_socket(cookie)
        assert (await ws.connect())[0]
        await ws.send_to(text_data="[" * 100_000)
        await ws.send_to(text_data='{"type": "inbox.changed", "request_id": "x", "change": "opened"}')
        received = await drain(ws)
        await ws.disconnect()
        return received

    assert async_to_sync(scenario)() == []


# --- what the page reads after a push ------------------------------------------------------------


def live(user: Any, query: str = "?cards=1") -> Any:
    client = Client()
    client.force_login(user)
    return client.get(f"/approvals/live/{query}")


def test_the_live_read_gives_an_approver_the_cards_of_their_inbox(personas, resumes) -> None:
    request = open_request(personas)

    answer = live(personas.approver).json()

    assert answer["pending"] == 1
    [card] = answer["cards"]
    assert card["id"] == str(request.pk)
    assert f'id="request-{request.pk}"' in card["html"] and 'name="csrfmiddlewaretoken"' in card["html"]
    assert live(personas.approver, "").json() == {"pending": 1}, "the nav only needs the count"


def test_the_live_read_shows_nothing_to_a_stranger_the_requester_or_the_signed_out(personas, resumes) -> None:
    request = open_request(personas)
    colleague = make_user("bob", personas.org)

    for user in (personas.stranger, personas.member, colleague):
        assert live(user).json() == {"pending": 0, "cards": [], "left": {}}, user.username
    for user in (personas.stranger, colleague):
        # Naming a request they may not read tells them nothing of it.
        assert live(user, f"?cards=1&shown={request.pk},not-an-id").json()["left"] == {}, user.username
    assert Client().get("/approvals/live/").status_code == 302


def test_a_settled_request_leaves_the_live_read(personas, resumes) -> None:
    request = open_request(personas)
    confirmation_decide(request_id=request.pk, user=personas.admin, approve=False, reason="no")

    assert live(personas.approver).json() == {"pending": 0, "cards": [], "left": {}}
    assert live(personas.approver, f"?cards=1&shown={request.pk}").json()["left"] == {
        str(request.pk): "adam rejected Purchase pay (PO-1001)."
    }, "the page that showed its card is told what became of it"


def test_a_verdict_followed_up_by_a_worker_still_reaches_the_approvers_inboxes(personas, resumes) -> None:
    # With runs and deliveries on Celery, a click's process only decides: the worker that resumes
    # the run and updates the card tells the inboxes too.
    from approvals.tasks import confirmation_settled_task

    request = open_request(personas)
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    resumes.run_ids.clear()  # the decision's own follow-up, in this process (embedded mode)

    heard = listen_while(
        personas,
        [personas.admin, personas.stranger],
        lambda: confirmation_settled_task(str(request.pk), request.run_id, "feishu", "approved"),
    )

    assert heard == [[{"request_id": str(request.pk), "change": "settled"}], []]
    assert resumes.run_ids == [request.run_id]
