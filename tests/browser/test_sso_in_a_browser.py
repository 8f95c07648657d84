"""An approver signs in through the organisation's identity provider in a real browser — the
provider is a real one, a process of its own (tests/oidc_provider) — and approves a request."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from approvals.models import ConfirmationRequest, ConfirmationStatus
from sso.models import ExternalIdentity
from tests.agents.engine_kit import Harness
from tests.approvals.kit import Resumes, pay_tool, set_policy, suspended_run
from tests.browser.shots import shoot
from tests.oidc_provider.kit import Provider
from tests.sso.kit import CLIENT_ID, CLIENT_SECRET, PASSWORD, REDIRECT_URI, configure

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def signed_up(personas: Any, idp: Provider, sso_settings: Any, live_server: Any, resumes: Resumes) -> Any:
    """Rita is an approver at the provider, and has signed in once before (her account exists, so
    the request waiting for her names her); built before the browser starts (see the inbox tests)."""
    idp.set_client(CLIENT_ID, CLIENT_SECRET, [REDIRECT_URI, f"{live_server.url}/sso/callback/"])
    configure(personas.org, idp)
    idp.set_user("rita", PASSWORD, "rita@acme.test", ["fim-approvers"], "Rita", "Ray")
    from tests.sso.kit import browser as http_browser
    from tests.sso.kit import sign_in

    sign_in(idp, http_browser(), "rita")
    set_policy(personas)
    return suspended_run(personas, Harness(pay_tool()))[1]


def test_an_approver_signs_in_with_the_provider_and_approves_from_the_inbox(
    live_server, idp: Provider, signed_up: ConfirmationRequest, resumes, page: Page
) -> None:
    request = signed_up

    page.goto(f"{live_server.url}/approvals/")
    expect(page).to_have_url(re.compile(r"/approvals/login/\?next=/approvals/$"))
    shoot(page, "sso-sign-in")
    page.get_by_role("link", name="Sign in with Example IdP").click()

    expect(page).to_have_title(re.compile("Example Identity Provider"))
    assert page.url.startswith(idp.issuer.rsplit("/o", 1)[0])
    shoot(page, "sso-provider-login")
    page.get_by_label("Username").fill("rita")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in to Example IdP").click()

    expect(page).to_have_url(f"{live_server.url}/approvals/")
    card = page.locator(f"#request-{request.pk}")
    expect(card).to_contain_text("Requested by alice")
    shoot(page, "sso-inbox")
    card.get_by_role("button", name="Approve").click()

    expect(page.locator(".msg")).to_have_text(re.compile("^Approved"))
    request.refresh_from_db()
    rita = ExternalIdentity.objects.get().user
    assert request.status == ConfirmationStatus.APPROVED and request.responded_by == rita
    assert resumes.run_ids == [request.run_id]

    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_role("heading", name="You are signed out")).to_be_visible()
    shoot(page, "sso-signed-out")
