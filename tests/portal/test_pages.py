"""The portal's pages: the way in, conversations, the chat page's data and its decision endpoint."""

from __future__ import annotations

import datetime as dt
import json
import re

import pytest
from django.test import Client
from django.utils import timezone

from agents import events as ev
from agents.models import Conversation, ExecutionPath, Run, RunEvent, RunStatus
from agents.services import run_start
from approvals.models import ConfirmationStatus
from tests.agents.engine_kit import Harness
from tests.approvals.kit import pay_tool, set_policy, suspended_run
from tests.personas import make_agent

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert("x")</script> **bold** [click](javascript:alert(1)) <img src=x onerror=alert(2)>'


@pytest.fixture(autouse=True)
def _no_dispatch(monkeypatch):
    """Runs started by the pages are created, not executed: the tests write their events."""
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)


def signed_in(user) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def a_conversation(personas, *, user=None, text="hello") -> tuple[Conversation, Run]:
    agent = make_agent(personas.org, personas.operator)
    run = run_start(agent=agent, user=user or personas.member, input=text)
    return run.conversation, run


def turns_of(response) -> list[dict]:
    match = re.search(r'<script id="turns-data" type="application/json">(.*?)</script>', response.text, re.S)
    assert match, "the chat page embeds its turns"
    return json.loads(match.group(1))


def test_the_home_page_tells_a_signed_out_visitor_what_this_is_and_how_to_sign_in() -> None:
    response = Client().get("/")
    assert response.status_code == 200
    assert "Agents that ask before they act" in response.text and "Approvers" in response.text
    assert 'href="/login/?next=/"' in response.text
    page = Client().get("/login/?next=/")
    assert page.status_code == 200 and "Sign in" in page.text


def test_the_landing_page_tells_people_how_to_try_the_demo_only_where_the_demo_is(settings) -> None:
    from agents.demo import DEMO_PASSWORD, demo_setup

    assert "Trying the demo" not in Client().get("/").text, "no demo loaded, no hint"
    demo_setup(base_url="http://127.0.0.1:9")

    page = Client().get("/").text

    hint = re.search(r'<p class="muted demo-hint" id="demo-hint">(.*?)</p>', page, re.S)
    assert hint, page
    text = re.sub(r"<[^>]+>", "", hint.group(1))
    assert text.startswith(
        "Trying the demo? Sign in as alice (chat), april (approve), aude (audit), oscar (configure) or "
        "adam (administer), with the password"
    )
    assert f"with the password {DEMO_PASSWORD}." in text
    # For people: no developer's command, no doubled space.
    assert "make run" not in page and "manage.py" not in page and "demo?  " not in page
    settings.FIMONE_ENV = "production"  # the demo is not served there
    assert "Trying the demo" not in Client().get("/").text


def test_it_shows_a_member_only_the_agents_of_their_own_organisations(personas) -> None:
    ours = make_agent(personas.org, personas.operator, name="Procurement assistant")
    theirs = make_agent(personas.other_org, personas.stranger, name="Globex secret bot")

    page = signed_in(personas.member).get("/")

    assert page.status_code == 200
    assert f'href="/agents/{ours.pk}/"' in page.text and "Globex secret bot" not in page.text
    stranger_page = signed_in(personas.stranger).get("/")
    assert "Globex secret bot" in stranger_page.text and "Procurement assistant" not in stranger_page.text
    assert signed_in(personas.stranger).get(f"/agents/{ours.pk}/").status_code == 404
    assert signed_in(personas.member).get(f"/agents/{theirs.pk}/").status_code == 404


def test_the_navigation_offers_what_each_role_allows(personas) -> None:
    set_policy(personas)
    suspended_run(personas, Harness(pay_tool()))  # one request waits for april (and adam)

    def nav(user) -> str:
        page = signed_in(user).get("/agents/").text
        return re.search(r'<nav aria-label="Main">(.*?)</nav>', page, re.S).group(1)

    member = nav(personas.member)
    assert 'href="/agents/"' in member and "/approvals/" not in member and "/admin/" not in member
    approver = nav(personas.approver)
    assert 'href="/approvals/"' in approver and 'class="count"' in approver and ">1<" in approver
    assert "/approvals/history/" not in approver
    auditor = nav(personas.auditor)
    assert 'href="/approvals/history/"' in auditor and "/admin/" not in auditor
    assert 'href="/admin/"' in nav(personas.operator)


def test_it_lists_a_members_recent_conversations_titled_by_their_first_message(personas) -> None:
    conversation, _ = a_conversation(personas, text="please pay the pending purchase")
    a_conversation(personas, user=personas.approver, text="april's own question")

    page = signed_in(personas.member).get("/")

    assert f'href="/conversations/{conversation.pk}/"' in page.text
    assert "please pay the pending purchase" in page.text and "april&#x27;s own question" not in page.text


def test_conversations_say_when_they_were_last_active_in_words(personas) -> None:
    agent = make_agent(personas.org, personas.operator)
    run_start(agent=agent, user=personas.member, input="a fresh one")
    older = run_start(agent=agent, user=personas.member, input="an older one")
    earlier = timezone.now() - dt.timedelta(minutes=90)
    Conversation.objects.filter(pk=older.conversation_id).update(created_at=earlier)
    Run.objects.filter(pk=older.pk).update(created_at=earlier)

    for url in ("/", f"/agents/{agent.pk}/"):
        said = re.findall(r"<time[^>]*>([^<]*)</time>", signed_in(personas.member).get(url).text)
        assert [re.sub(r"\s+", " ", text) for text in said] == ["just now", "1 hour, 30 minutes ago"]


def test_a_member_starts_a_conversation_from_the_portal(personas) -> None:
    agent = make_agent(personas.org, personas.operator)

    response = signed_in(personas.member).post(f"/agents/{agent.pk}/", {"message": "  hello there  "})

    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/conversations/{run.conversation_id}/"
    assert run.input == "hello there" and run.execution_path == ExecutionPath.PORTAL
    assert run.user == personas.member and run.conversation.title == "hello there"


def test_it_refuses_an_empty_first_message_with_a_clear_error(personas) -> None:
    agent = make_agent(personas.org, personas.operator)

    response = signed_in(personas.member).post(f"/agents/{agent.pk}/", {"message": "   "})

    assert response.status_code == 400 and "Check your message" in response.text
    assert not Run.objects.exists()


def test_a_member_continues_a_finished_conversation_with_a_new_run(personas) -> None:
    conversation, first = a_conversation(personas)
    Run.objects.filter(pk=first.pk).update(status=RunStatus.COMPLETED)

    response = signed_in(personas.member).post(f"/conversations/{conversation.pk}/", {"message": "and then?"})

    assert response.status_code == 302
    runs = list(conversation.runs.order_by("pk"))
    assert [r.input for r in runs] == ["hello", "and then?"]
    assert runs[1].execution_path == ExecutionPath.PORTAL


def test_it_refuses_a_second_message_while_the_run_is_in_progress(personas) -> None:
    conversation, _ = a_conversation(personas)
    client = signed_in(personas.member)

    response = client.post(f"/conversations/{conversation.pk}/", {"message": "again"}, follow=True)

    assert conversation.runs.count() == 1
    assert "Not sent: this conversation already has a run in progress." in response.text


def test_another_organisations_member_gets_a_404_page_for_a_conversation(personas) -> None:
    conversation, run = a_conversation(personas, text="confidential plans")

    for url in (f"/conversations/{conversation.pk}/", f"/runs/{run.pk}/events/1/html/"):
        response = signed_in(personas.stranger).get(url)
        assert response.status_code == 404, url
        assert "confidential plans" not in response.text
    page = signed_in(personas.stranger).get(f"/conversations/{conversation.pk}/")
    assert "Page not found" in page.text and "Traceback" not in page.text
    posted = signed_in(personas.stranger).post(f"/conversations/{conversation.pk}/", {"message": "hi"})
    assert posted.status_code == 404 and conversation.runs.count() == 1
    # A colleague in the same organisation does not read it either.
    assert signed_in(personas.approver).get(f"/conversations/{conversation.pk}/").status_code == 404


def test_it_renders_model_markup_as_text_and_markdown_as_safe_formatting(personas) -> None:
    conversation, run = a_conversation(personas, text=HOSTILE)
    RunEvent.objects.create(
        run=run, seq=1, type=ev.LLM_MESSAGE, payload={"content": HOSTILE, "tool_calls": []}
    )
    RunEvent.objects.create(run=run, seq=2, type=ev.RUN_COMPLETED, payload={"output": HOSTILE})
    Run.objects.filter(pk=run.pk).update(status=RunStatus.COMPLETED)

    page = signed_in(personas.member).get(f"/conversations/{conversation.pk}/")

    assert page.status_code == 200
    assert "<script>alert" not in page.text and "<img" not in page.text, "model markup is never markup"
    (turn,) = turns_of(page)
    assert turn["input"] == HOSTILE  # data, set as text by the page
    html = turn["html"]["1"]
    assert "<strong>bold</strong>" in html
    assert (
        "<script" not in html and "<img" not in html and "javascript:" not in html.replace("(javascript:", "")
    )
    assert "&lt;script&gt;" in html
    fetched = signed_in(personas.member).get(f"/runs/{run.pk}/events/2/html/").json()
    assert fetched["html"] == html


def test_the_html_of_an_event_without_model_text_is_not_found(personas) -> None:
    _, run = a_conversation(personas)
    RunEvent.objects.create(run=run, seq=1, type=ev.TOOL_PROPOSED, payload={"tool": "x", "arguments": {}})

    assert signed_in(personas.member).get(f"/runs/{run.pk}/events/1/html/").status_code == 404
    assert signed_in(personas.member).get(f"/runs/{run.pk}/events/9/html/").status_code == 404


def test_an_approver_decides_from_the_chat_page_and_others_are_refused(
    personas, resumes, django_capture_on_commit_callbacks
) -> None:
    set_policy(personas)
    run, request = suspended_run(personas, Harness(pay_tool()))
    url = f"/requests/{request.pk}/decide/"
    json_accept = {"HTTP_ACCEPT": "application/json"}

    page = signed_in(personas.member).get(f"/conversations/{run.conversation_id}/")
    (turn,) = turns_of(page)
    assert turn["decidable"] == []  # alice asked; she may not approve her own call
    assert signed_in(personas.member).get(f"/requests/{request.pk}/").json()["may_decide"] is False
    assert signed_in(personas.approver).get(f"/requests/{request.pk}/").json()["may_decide"] is True
    assert signed_in(personas.stranger).get(f"/requests/{request.pk}/").status_code == 404

    refused = signed_in(personas.member).post(url, {"decision": "approve"}, **json_accept)
    assert refused.status_code == 403 and refused.json()["accepted"] is False
    foreign = signed_in(personas.stranger).post(url, {"decision": "approve"}, **json_accept)
    assert foreign.status_code == 404
    bad = signed_in(personas.approver).post(url, {"decision": "maybe"}, **json_accept)
    assert bad.status_code == 400
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING

    with django_capture_on_commit_callbacks(execute=True):
        accepted = signed_in(personas.approver).post(
            url, {"decision": "approve", "reason": "ok"}, **json_accept
        )
    assert accepted.status_code == 200 and accepted.json()["accepted"] is True
    late = signed_in(personas.admin).post(url, {"decision": "reject"}, **json_accept)
    assert late.status_code == 409 and "already approved" in late.json()["message"]
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.APPROVED and request.responded_by == personas.approver
    assert resumes.run_ids == [run.pk]


def test_a_decision_without_javascript_returns_to_the_page_it_came_from(personas, resumes) -> None:
    set_policy(personas)
    run, request = suspended_run(personas, Harness(pay_tool()))
    back = f"/conversations/{run.conversation_id}/"

    response = signed_in(personas.approver).post(
        f"/requests/{request.pk}/decide/", {"decision": "reject", "next": back}
    )
    assert response.status_code == 302 and response["Location"] == back
    away = signed_in(personas.admin).post(
        f"/requests/{request.pk}/decide/", {"decision": "reject", "next": "https://evil.example/"}
    )
    assert away["Location"] == "/"


def test_an_unknown_page_is_a_friendly_404_page(personas) -> None:
    response = signed_in(personas.member).get("/no/such/page/")
    assert response.status_code == 404
    assert "Page not found" in response.text and "Back to your agents" in response.text


def test_a_crash_shows_a_friendly_500_page_without_a_traceback(personas, monkeypatch) -> None:
    def broken(**kwargs):
        raise RuntimeError("secret-token-123 leaked in a crash")

    monkeypatch.setattr("portal.selectors.agents_for", broken)

    response = signed_in(personas.member).get("/")

    assert response.status_code == 500
    assert "Something went wrong" in response.text
    assert "secret-token-123" not in response.text and "Traceback" not in response.text
