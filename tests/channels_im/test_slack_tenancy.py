"""One tenant, one wall, on Slack (docs/design.md §1.11): a signed click counts only through an IM
identity of the channel's organisation, its user is re-checked at decision time, and another
organisation's request answers 404 with nothing written on it.

Cards and clicks go through the same fake Slack and real callback endpoint as test_slack_flow.
"""

from __future__ import annotations

import datetime as dt
import html
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.http import HttpResponse
from django.test import Client
from django.utils import timezone

from approvals.models import ConfirmationEvent, ConfirmationStatus
from channels_im.models import ImIdentity, ImLinkOffer
from tenancy.models import Membership, Role
from tests.approvals.kit import set_policy
from tests.channels_im.slack_fake import FakeSlack, click_body, signed_headers
from tests.channels_im.test_slack_flow import APRIL, Flow, ephemeral_text, park
from tests.personas import PASSWORD, make_user

pytestmark = pytest.mark.django_db(transaction=True)

Kind = ConfirmationEvent.Kind


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


def assert_pending_and_refused(flow: Flow, resumes: Any, reason: str) -> ConfirmationEvent:
    request = flow.refresh()
    assert request.status == ConfirmationStatus.PENDING and request.responded_by is None
    assert resumes.run_ids == [] and flow.slack.calls("chat.update") == []
    [refused] = request.events.filter(kind=Kind.CLICK_REFUSED)
    assert reason in refused.details["reason"], refused.details
    return refused


# --- item 3: the clicker is re-checked ---------------------------------------------------------


def test_it_refuses_a_slack_click_by_an_approver_removed_from_the_organisation(
    personas, resumes, slack
) -> None:
    flow = park(personas, slack)
    Membership.objects.filter(user=personas.approver, organization=personas.org).delete()

    response = flow.post(*flow.click())

    assert "no longer a member of the organisation" in ephemeral_text(response)
    refused = assert_pending_and_refused(flow, resumes, "no longer a member")
    assert refused.actor == personas.approver and refused.actor_external_id == APRIL


def test_it_refuses_a_slack_click_by_a_deactivated_approver(personas, resumes, slack) -> None:
    flow = park(personas, slack)
    personas.approver.is_active = False
    personas.approver.save()

    response = flow.post(*flow.click())

    assert "deactivated" in ephemeral_text(response)
    assert assert_pending_and_refused(flow, resumes, "deactivated").actor == personas.approver


def test_it_refuses_a_slack_click_by_an_approver_the_current_policy_excludes(
    personas, resumes, slack
) -> None:
    flow = park(personas, slack)
    set_policy(personas, allow_org_approvers=False)

    response = flow.post(*flow.click(action="reject"))

    assert "current policy" in ephemeral_text(response)
    assert_pending_and_refused(flow, resumes, "no longer an approver under the agent's current policy")


# --- item 8: another organisation's request ----------------------------------------------------


def test_it_answers_404_to_a_click_on_another_organisations_request_and_writes_nothing(
    personas, resumes, slack
) -> None:
    flow = park(personas, slack)
    globex = slack.channel_config(personas.other_org, name="Globex Slack")
    body = click_body(request_id=str(flow.request.pk), user_id=APRIL)

    response = flow.post(body, signed_headers(body), config=globex)

    assert response.status_code == 404
    request = flow.refresh()
    assert request.status == ConfirmationStatus.PENDING
    assert list(request.events.values_list("kind", flat=True)) == [Kind.CREATED, Kind.DELIVERED]


# --- item 2: identities belong to one organisation ---------------------------------------------

GABE = "U0GABE"  # the Slack id of Globex's admin


def test_it_refuses_the_cross_tenant_attack_of_another_organisations_admin(personas, resumes, slack) -> None:
    """Globex's admin adds Acme's approver to Globex (no consent needed once), maps their own
    Slack id to her there, and clicks Acme's card: nothing changes, it is logged, and the link
    offered to the clicker only works for members of Acme."""
    flow = park(personas, slack)
    globex_admin = make_user("gabe", personas.other_org, Role.ADMIN, is_staff=True)
    Membership.objects.create(organization=personas.other_org, user=personas.approver, role=Role.APPROVER)
    ImIdentity.objects.create(
        organization=personas.other_org, user=personas.approver, provider="slack", external_id=GABE
    )

    response = flow.post(*flow.click(user=GABE))  # signed, through Acme's channel

    text = ephemeral_text(response)
    assert "not linked to FIM One in Acme" in text
    refused = assert_pending_and_refused(flow, resumes, "not mapped to a user")
    assert refused.actor is None and refused.actor_external_id == GABE

    # Through Globex's own channel, Acme's request does not exist, and nothing is written.
    globex = slack.channel_config(personas.other_org, name="Globex Slack")
    body = click_body(request_id=str(flow.request.pk), user_id=GABE)
    assert flow.post(body, signed_headers(body), config=globex).status_code == 404
    assert flow.request.events.filter(kind=Kind.CLICK_REFUSED).count() == 1

    # The link the click offered cannot be completed by Globex's admin: not a member of Acme.
    client = Client()
    client.force_login(globex_admin)
    assert client.post(link_path(text)).status_code == 403
    assert not ImIdentity.objects.filter(organization=personas.org, external_id=GABE).exists()
    assert flow.refresh().status == ConfirmationStatus.PENDING


# --- the link flow -------------------------------------------------------------------------------

ADAM = "U0ADAM"


def link_path(text: str) -> str:
    [url] = re.findall(r"https?://\S+/im/link/[A-Za-z0-9_\-]+/", text)
    return urlsplit(url).path


def csrf_of(page: HttpResponse) -> str:
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)


def offered_link(flow: Flow, user: str = ADAM) -> str:
    return link_path(ephemeral_text(flow.post(*flow.click(user=user))))


def test_an_unlinked_approver_links_their_slack_account_and_their_next_click_decides(
    personas, resumes, slack
) -> None:
    flow = park(personas, slack)
    path = offered_link(flow)
    assert flow.refresh().status == ConfirmationStatus.PENDING

    client = Client(enforce_csrf_checks=True)
    assert client.get(path)["Location"] == f"/approvals/login/?next={path}"
    login = client.get(f"/approvals/login/?next={path}")
    signed_in = client.post(
        "/approvals/login/",
        {"username": "adam", "password": PASSWORD, "next": path, "csrfmiddlewaretoken": csrf_of(login)},
    )
    assert signed_in["Location"] == path, "signing in leads back to the link"
    page = client.get(path)
    assert page.status_code == 200
    assert "Link Slack user U0ADAM (u0adam) to your account in Acme?" in " ".join(
        html.unescape(re.sub(r"<[^>]+>", "", page.content.decode())).split()
    )
    assert not ImIdentity.objects.filter(external_id=ADAM).exists(), "a GET links nothing"

    confirmed = client.post(path, {"csrfmiddlewaretoken": csrf_of(page)})

    assert confirmed.status_code == 302 and confirmed["Location"] == "/approvals/"
    identity = ImIdentity.objects.get(external_id=ADAM)
    assert (identity.organization, identity.user, identity.provider) == (
        personas.org,
        personas.admin,
        "slack",
    )
    assert identity.linked_by == personas.admin and identity.display_name == "u0adam"

    response = flow.post(*flow.click(user=ADAM))

    assert response.json()["replace_original"] is True
    request = flow.refresh()
    assert request.status == ConfirmationStatus.APPROVED and request.responded_by == personas.admin
    assert request.responded_by_external_id == ADAM


def test_it_refuses_to_reuse_a_link(personas, resumes, slack) -> None:
    flow = park(personas, slack)
    path = offered_link(flow)
    client = Client()
    client.force_login(personas.admin)
    assert client.post(path).status_code == 302

    again = client.post(path)

    assert again.status_code == 410 and "already used" in again.content.decode()
    assert ImIdentity.objects.filter(external_id=ADAM).count() == 1


def test_it_refuses_a_forged_link(personas, resumes, slack) -> None:
    flow = park(personas, slack)
    path = offered_link(flow)
    client = Client()
    client.force_login(personas.admin)

    for forged in (path[:-2] + "x/", "/im/link/" + "A" * 43 + "/", "/im/link/%00/"):
        response = client.post(forged)
        assert response.status_code == 404, forged
    assert not ImIdentity.objects.filter(external_id=ADAM).exists()


def test_it_refuses_a_link_used_after_it_expired(personas, resumes, slack) -> None:
    flow = park(personas, slack)
    path = offered_link(flow)
    ImLinkOffer.objects.update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    client = Client()
    client.force_login(personas.admin)

    response = client.post(path)

    assert response.status_code == 410 and "expired" in response.content.decode()
    assert not ImIdentity.objects.filter(external_id=ADAM).exists()


def test_it_refuses_a_link_opened_by_a_user_of_another_organisation(personas, resumes, slack) -> None:
    flow = park(personas, slack)
    path = offered_link(flow)
    client = Client()
    client.force_login(personas.stranger)

    assert client.get(path).status_code == 403
    response = client.post(path)

    assert response.status_code == 403 and "Acme" not in response.content.decode()
    assert not ImIdentity.objects.filter(external_id=ADAM).exists()
    assert ImLinkOffer.objects.get().used_at is None, "the offer is still the clicker's to use"


def test_it_refuses_to_link_without_the_csrf_token(personas, resumes, slack) -> None:
    flow = park(personas, slack)
    path = offered_link(flow)
    client = Client(enforce_csrf_checks=True)
    client.force_login(personas.admin)

    assert client.post(path).status_code == 403
    assert not ImIdentity.objects.filter(external_id=ADAM).exists()


def test_a_new_click_replaces_the_clickers_earlier_link(personas, resumes, slack) -> None:
    flow = park(personas, slack)
    first = offered_link(flow)
    second = offered_link(flow)
    client = Client()
    client.force_login(personas.admin)

    assert first != second and ImLinkOffer.objects.count() == 1
    assert client.post(first).status_code == 404
    assert client.post(second).status_code == 302


def test_it_refuses_to_link_a_slack_id_already_linked_to_someone_else(personas, resumes, slack) -> None:
    flow = park(personas, slack)
    path = offered_link(flow)
    ImIdentity.objects.create(
        organization=personas.org, user=personas.auditor, provider="slack", external_id=ADAM
    )
    client = Client()
    client.force_login(personas.admin)

    response = client.post(path)

    assert response.status_code == 409
    assert ImIdentity.objects.get(external_id=ADAM).user == personas.auditor
    assert ImLinkOffer.objects.get().used_at is None
