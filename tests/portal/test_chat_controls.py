"""The chat page's controls and the ways in: Stop, Retry, rename, archive and search over one's own
conversations; approvers land in their inbox; auditors read but do not chat; the portal's own 404
and 500 pages in development too."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from agents import events as ev
from agents.models import Conversation, Run, RunEvent, RunStatus
from agents.services import run_start
from approvals.models import ApproverPolicy, ConfirmationRequest, ConfirmationStatus, ConfirmationVote
from tenancy.models import Membership, Role
from tests.agents.engine_kit import Harness
from tests.approvals.kit import pay_tool, recorded_request, set_policy, suspended_run
from tests.personas import make_agent

pytestmark = pytest.mark.django_db

JSON = {"HTTP_ACCEPT": "application/json"}


@pytest.fixture(autouse=True)
def _no_dispatch(monkeypatch):
    """Runs started by the pages are created, not executed: the tests say how they end."""
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)


def signed_in(user: Any) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def finished_conversation(personas, *, user=None, text="hello", title=None) -> tuple[Conversation, Run]:
    agent = make_agent(personas.org, personas.operator)
    run = run_start(agent=agent, user=user or personas.member, input=text)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.COMPLETED, output="All done.")
    if title is not None:
        Conversation.objects.filter(pk=run.conversation_id).update(title=title)
    return Conversation.objects.get(pk=run.conversation_id), run


def turns_of(response) -> list[dict]:
    match = re.search(r'<script id="turns-data" type="application/json">(.*?)</script>', response.text, re.S)
    assert match, "the chat page embeds its turns"
    return json.loads(match.group(1))


# --- the way in ------------------------------------------------------------------------------------


def test_an_approver_and_nothing_else_lands_in_the_inbox_and_finds_the_agents_one_click_away(
    personas,
) -> None:
    response = signed_in(personas.approver).get("/")
    assert response.status_code == 302 and response["Location"] == "/approvals/"
    agents = signed_in(personas.approver).get("/agents/")
    assert agents.status_code == 200 and "Your agents" in agents.text

    assert signed_in(personas.member).get("/").status_code == 200
    assert signed_in(personas.admin).get("/").status_code == 200  # admins configure too: home stays
    Membership.objects.create(organization=personas.other_org, user=personas.approver, role=Role.MEMBER)
    assert signed_in(personas.approver).get("/").status_code == 200  # a member elsewhere chats there


def test_the_inbox_link_shows_for_someone_a_policy_names_even_with_nothing_waiting(personas) -> None:
    def nav(user) -> str:
        page = signed_in(user).get("/agents/").text
        return re.search(r'<nav aria-label="Main">(.*?)</nav>', page, re.S).group(1)

    assert "/approvals/" not in nav(personas.member)
    policy = ApproverPolicy.objects.create(organization=personas.org)
    policy.named_users.add(personas.member)
    assert 'href="/approvals/"' in nav(personas.member)


def test_an_agent_card_says_what_the_agent_can_do_not_its_instructions_for_the_model(personas) -> None:
    make_agent(
        personas.org,
        personas.operator,
        instructions="You are a SECRET-PROMPT. Use oa__purchase_list to look up purchases.",
        builtin_tools=["current_time", "calculator"],
    )

    page = signed_in(personas.member).get("/agents/")

    assert "SECRET-PROMPT" not in page.text and "oa__" not in page.text
    assert "Can use: Calculator, Current time" in page.text


# --- auditors read, they do not chat -------------------------------------------------------------------


def test_an_auditor_reads_but_may_not_chat_on_the_pages_or_the_api(personas) -> None:
    agent = make_agent(personas.org, personas.operator)
    aude = signed_in(personas.auditor)

    page = aude.get(f"/agents/{agent.pk}/")
    assert page.status_code == 200
    assert "auditors read the record but do not chat with agents" in page.text
    assert 'id="composer"' not in page.text
    posted = aude.post(f"/agents/{agent.pk}/", {"message": "pay everything"})
    assert posted.status_code == 403 and "auditors read the record" in posted.text
    api = APIClient()
    api.force_login(personas.auditor)
    refused = api.post(f"/api/agents/{agent.pk}/runs/", {"input": "pay everything"}, format="json")
    assert refused.status_code == 403 and "auditors read the record" in refused.json()["detail"]
    assert not Run.objects.exists()
    assert "You are an auditor" in aude.get("/agents/").text

    # The rule is per organisation: a member of Globex chats there, whatever she is at Acme.
    globex_agent = make_agent(personas.other_org, personas.stranger, name="Globex helper")
    Membership.objects.create(organization=personas.other_org, user=personas.auditor, role=Role.MEMBER)
    assert aude.post(f"/agents/{globex_agent.pk}/", {"message": "hello"}).status_code == 302
    assert aude.post(f"/agents/{agent.pk}/", {"message": "hello"}).status_code == 403
    # A second role alongside (here: member) makes her a person who chats at Acme too.
    Membership.objects.create(organization=personas.org, user=personas.auditor, role=Role.MEMBER)
    assert aude.post(f"/agents/{agent.pk}/", {"message": "hello"}).status_code == 302


def test_an_auditors_pages_offer_where_she_reads_not_conversations(personas) -> None:
    agent = make_agent(personas.org, personas.operator)
    aude = signed_in(personas.auditor)

    home = aude.get("/agents/").text

    assert "Recent conversations" not in home and 'role="search"' not in home
    assert "Your conversations will be listed here" not in home
    assert 'href="/approvals/history/"' in re.search(r'id="where-you-read".*?</ul>', home, re.S).group(0)
    nav = re.search(r'<nav aria-label="Main">(.*?)</nav>', home, re.S).group(1)
    assert ">Agents</a>" in nav and ">Chat</a>" not in nav, "she is not offered a chat"
    # The agent's page leads to its part of the record: the history, filtered to it.
    page = aude.get(f"/agents/{agent.pk}/").text
    link = re.search(r'<a [^>]*href="([^"]+)" id="agent-history"', page)
    assert link and link.group(1) == f"/approvals/history/?agent={agent.pk}"
    history = aude.get(link.group(1))
    assert history.status_code == 200 and f'<option value="{agent.pk}" selected>' in history.text
    # A member chats: her home lists her conversations, her nav says Chat, no record link.
    alice = signed_in(personas.member)
    assert "Recent conversations" in alice.get("/agents/").text
    assert 'id="agent-history"' not in alice.get(f"/agents/{agent.pk}/").text


# --- rename, archive, search ----------------------------------------------------------------------


def test_a_member_renames_her_conversation_and_nobody_else_can(personas) -> None:
    conversation, _ = finished_conversation(personas, text="please pay the pending purchase")
    url = f"/conversations/{conversation.pk}/rename/"

    renamed = signed_in(personas.member).post(url, {"title": "  Paying   PO-1001 "}, **JSON)
    assert renamed.status_code == 200 and renamed.json()["title"] == "Paying PO-1001"
    empty = signed_in(personas.member).post(url, {"title": "   "}, **JSON)
    assert empty.status_code == 400 and "Check the title" in empty.json()["message"]
    for someone in (personas.approver, personas.stranger):
        assert signed_in(someone).post(url, {"title": "mine now"}).status_code == 404
    conversation.refresh_from_db()
    assert conversation.title == "Paying PO-1001"


def test_an_archived_conversation_leaves_the_lists_takes_no_message_and_stays_whole(personas) -> None:
    conversation, run = finished_conversation(personas, text="please pay the pending purchase")
    RunEvent.objects.create(run=run, seq=1, type=ev.RUN_COMPLETED, payload={"output": "All done."})
    alice = signed_in(personas.member)

    archived = alice.post(f"/conversations/{conversation.pk}/archive/", follow=True)

    assert archived.redirect_chain[-1][0] == "/agents/"
    title = conversation.title
    link = '<a href="/conversations/?archived=1">Archived conversations</a>'
    assert f"“{title}” is archived. Find it under {link}." in archived.text, archived.text
    assert f'href="/conversations/{conversation.pk}/"' not in alice.get("/agents/").text
    # A search finds it still, marked as archived.
    found = alice.get("/conversations/?q=pay").text
    item = re.search(rf'<li>\s*<a href="/conversations/{conversation.pk}/">.*?</li>', found, re.S)
    assert item and '<span class="badge archived-mark">Archived</span>' in item.group(0)
    assert f'href="/conversations/{conversation.pk}/"' in alice.get("/conversations/?archived=1").text
    page = alice.get(f"/conversations/{conversation.pk}/")
    day = timezone.localdate(Conversation.objects.get(pk=conversation.pk).archived_at).isoformat()
    assert page.status_code == 200
    assert f"Archived on {day}. It is kept for the record and takes no new messages." in page.text
    assert 'id="composer"' not in page.text
    alice.post(f"/conversations/{conversation.pk}/", {"message": "and then?"})
    alice.post(f"/conversations/{conversation.pk}/retry/")
    assert list(Run.objects.values_list("pk", flat=True)) == [run.pk]  # nothing deleted, nothing added
    assert RunEvent.objects.filter(run=run).count() == 1
    assert Conversation.objects.get(pk=conversation.pk).archived_at is not None

    alice.post(f"/conversations/{conversation.pk}/restore/")
    assert f'href="/conversations/{conversation.pk}/"' in alice.get("/agents/").text
    assert "archived-mark" not in alice.get("/conversations/?q=pay").text


def test_a_conversation_with_a_run_in_progress_is_not_archived(personas) -> None:
    agent = make_agent(personas.org, personas.operator)
    run = run_start(agent=agent, user=personas.member, input="hello")

    response = signed_in(personas.member).post(f"/conversations/{run.conversation_id}/archive/", follow=True)

    assert "Not archived: this conversation has a run in progress; stop it first." in response.text
    assert Conversation.objects.get(pk=run.conversation_id).archived_at is None


def test_search_finds_her_own_conversations_by_title_and_messages_only(personas) -> None:
    by_title, _ = finished_conversation(personas, text="hello", title="Office chairs")
    by_message, _ = finished_conversation(personas, text="what did we pay for chairs?")
    by_answer, run = finished_conversation(personas, text="anything else?")
    Run.objects.filter(pk=run.pk).update(output="Lumen sent the CHAIRS yesterday.")
    finished_conversation(personas, text="nothing to see")
    finished_conversation(personas, user=personas.approver, text="april's chairs")

    page = signed_in(personas.member).get("/conversations/?q=chairs")

    found = re.findall(r'href="/conversations/(\d+)/"', page.text)
    assert sorted(int(pk) for pk in found) == sorted([by_title.pk, by_message.pk, by_answer.pk])
    assert "“chairs” found in 3 of your conversations" in page.text
    assert signed_in(personas.member).get("/conversations/?q=" + "x" * 5000).status_code == 200


def test_search_finds_what_the_agent_said_between_its_calls_and_what_its_cards_were_about(personas) -> None:
    said, said_run = finished_conversation(personas, text="settle the hosting bill")
    RunEvent.objects.create(
        run=said_run,
        seq=50,
        type=ev.LLM_MESSAGE,
        payload={"content": "Paying PO-1002: 4,800.00 USD to Northwind Cloud.", "tool_calls": []},
    )
    carded, card_run = finished_conversation(personas, text="pay the furniture")
    request = recorded_request(personas, requester=personas.member)
    ConfirmationRequest.objects.filter(pk=request.pk).update(
        run=card_run, context=[{"label": "Vendor", "value": "Zürich Möbel AG"}]
    )
    _, other_run = finished_conversation(personas, user=personas.approver, text="april's own")
    RunEvent.objects.create(
        run=other_run, seq=50, type=ev.LLM_MESSAGE, payload={"content": "Northwind again", "tool_calls": []}
    )
    alice = signed_in(personas.member)

    def found(query: str) -> list[int]:
        page = alice.get("/conversations/", {"q": query})
        return sorted(int(pk) for pk in re.findall(r'href="/conversations/(\d+)/"', page.text))

    assert found("northwind") == [said.pk]
    assert found("Zürich möbel") == [carded.pk]
    assert found("Annual hosting") == []


# --- retry and stop -----------------------------------------------------------------------------------


def test_retry_sends_the_last_message_again_as_a_new_run_of_the_same_conversation(personas, settings) -> None:
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"run_start": "2/min"}}
    conversation, first = finished_conversation(personas, text="please pay the pending purchase")
    alice = signed_in(personas.member)

    response = alice.post(f"/conversations/{conversation.pk}/retry/")

    assert response.status_code == 302 and response["Location"] == f"/conversations/{conversation.pk}/"
    second = conversation.runs.order_by("pk").last()
    assert second.pk != first.pk and second.input == first.input and second.execution_path == "portal"
    Run.objects.filter(pk=second.pk).update(status=RunStatus.FAILED)
    alice.post(f"/conversations/{conversation.pk}/retry/")  # the second start of the minute
    throttled = alice.post(f"/conversations/{conversation.pk}/retry/")
    assert throttled.status_code == 429 and throttled["Retry-After"]
    assert conversation.runs.count() == 3
    assert signed_in(personas.stranger).post(f"/conversations/{conversation.pk}/retry/").status_code == 404


def test_stop_cancels_a_parked_run_and_withdraws_its_request(
    personas, resumes, django_capture_on_commit_callbacks
) -> None:
    set_policy(personas)
    run, request = suspended_run(personas, Harness(pay_tool()))
    url = f"/conversations/{run.conversation_id}/stop/"
    assert signed_in(personas.stranger).post(url, **JSON).status_code == 404

    with django_capture_on_commit_callbacks(execute=True):
        stopped = signed_in(personas.member).post(url, **JSON)

    assert stopped.status_code == 200 and stopped.json()["ok"] is True
    run.refresh_from_db()
    request.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and request.status == ConfirmationStatus.CANCELLED
    again = signed_in(personas.member).post(url, **JSON)
    assert again.status_code == 409 and again.json()["message"] == "Nothing is running in this conversation."
    # Reopened, the page knows the request was withdrawn although the run recorded no verdict.
    (turn,) = turns_of(signed_in(personas.member).get(f"/conversations/{run.conversation_id}/"))
    assert turn["requests"][str(request.pk)]["status"] == "cancelled"


def test_stop_withdraws_the_request_of_a_run_still_waiting_inline_at_once(personas) -> None:
    """A run waiting inline for a verdict is *running*: cancelling it alone would leave its request
    open to approvers until the inline window ends. Stop withdraws it at once."""
    set_policy(personas)
    run, request = suspended_run(personas, Harness(pay_tool()))
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)  # as while the gate waits inline

    stopped = signed_in(personas.member).post(f"/conversations/{run.conversation_id}/stop/", **JSON)

    assert stopped.status_code == 200
    request.refresh_from_db()
    run.refresh_from_db()
    assert request.status == ConfirmationStatus.CANCELLED and "cancelled by the user" in request.reason
    assert run.cancel_requested


def test_any_cancel_withdraws_the_request_of_a_run_still_waiting_inline(personas) -> None:
    """Not only the chat's Stop: the REST API's cancel (and the admin's, through the same service)
    withdraws at once the request of a run the gate keeps waiting inline, and an approval that
    comes after it is refused."""
    from rest_framework.test import APIClient

    from approvals.services import confirmation_decide

    set_policy(personas)
    run, request = suspended_run(personas, Harness(pay_tool()))
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)  # as while the gate waits inline
    api = APIClient()
    api.force_authenticate(personas.member)

    assert api.post(f"/api/runs/{run.pk}/cancel/").status_code in (200, 202)

    request.refresh_from_db()
    assert request.status == ConfirmationStatus.CANCELLED
    late = confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    request.refresh_from_db()
    assert not late.accepted and request.status == ConfirmationStatus.CANCELLED


def test_the_page_reads_the_votes_of_a_request_waiting_for_more(personas, resumes) -> None:
    set_policy(personas, approvals_required=2)
    run, request = suspended_run(personas, Harness(pay_tool()))
    ConfirmationVote.objects.create(
        request=request, user=personas.approver, approve=True, reason="fine", created_at=timezone.now()
    )

    (turn,) = turns_of(signed_in(personas.member).get(f"/conversations/{run.conversation_id}/"))

    state = turn["requests"][str(request.pk)]
    assert state["status"] == "pending" and state["approvals"] == 1 and state["approvals_required"] == 2
    assert [(v["by"], v["approve"], v["reason"]) for v in state["votes"]] == [("april", True, "fine")]


# --- error pages in development -------------------------------------------------------------------


def test_with_debug_on_people_get_the_portals_404_and_500_and_machines_keep_theirs(
    personas, settings, monkeypatch
) -> None:
    settings.DEBUG = True
    alice = signed_in(personas.member)

    for path in ("/no/such/page/", "/conversations/999999/"):
        page = alice.get(path)
        assert page.status_code == 404, path
        assert "Page not found" in page.text and "Back to your agents" in page.text
        assert "URLconf" not in page.text and "Django tried these URL patterns" not in page.text
    signed_out = Client().get("/no/such/page/")  # signed out too: no agents to go back to
    assert signed_out.status_code == 404 and "Page not found" in signed_out.text
    assert 'href="/login/">Sign in</a>' in signed_out.text and "Back to your agents" not in signed_out.text
    assert alice.get("/agents").status_code == 301  # a missing slash is still added
    api = alice.get("/api/runs/999999/events/")
    assert api.status_code == 404 and api["Content-Type"].startswith("application/json")
    assert "Page not found" not in alice.get("/admin/no-such-page/").text

    def broken(**kwargs):
        raise RuntimeError("secret-token-123 leaked in a crash")

    monkeypatch.setattr("portal.selectors.agents_for", broken)
    crashed = alice.get("/agents/")
    assert crashed.status_code == 500 and "Something went wrong" in crashed.text
    assert "secret-token-123" not in crashed.text and "Traceback" not in crashed.text
