"""People in a real browser, at a laptop's and a phone's width (issue 23, "Organisation admin"):
the demo's only admin cannot demote himself (the page says why, nothing changes) on a page that says
"organisation" and names the index's group in its breadcrumbs; someone invited by e-mail, with no
account yet, follows the link, sets a password and is signed in where their role starts, and the
admin who invited them reads one message saying what was made and sent.

Screenshots go where every browser test's go (tests/browser/shots.py)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.core import mail
from playwright.sync_api import expect

from agents.demo import DEMO_PASSWORD, demo_setup
from tenancy.models import Membership, Organization, Role
from tests.browser.admin_pages import WIDTHS, broken_words, lines_of, open_page, sign_in_to_admin
from tests.browser.shots import shoot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo_org() -> Organization:
    demo_setup(base_url="http://127.0.0.1:8000")
    return Membership.objects.select_related("organization").get(user__username="adam").organization


@pytest.mark.parametrize("width", WIDTHS)
def test_the_only_admin_cannot_demote_himself_and_the_page_says_why(
    live_server: Any, demo_org: Organization, browser: Any, width: int
) -> None:
    page = open_page(browser, width)
    sign_in_to_admin(page, live_server.url, "adam")
    page.goto(f"{live_server.url}/admin/tenancy/organization/{demo_org.pk}/change/")
    # The product's spelling, and the index's group (not the Python app) in the breadcrumbs.
    expect(page.locator("h1")).to_have_text("Change organisation")
    expect(page.locator(".breadcrumbs")).to_contain_text(
        f"Home \u203a Organisations & people \u203a Organisations \u203a {demo_org.name}"
    )
    expect(page.locator("#content")).not_to_contain_text("rganization")
    assert broken_words(page.locator("#memberships-group thead")) == []
    shoot(page, "organisation-as-adam")
    # adam's row by its user cell (every row's manager list names adam too)
    adams_row = page.locator("tr.form-row").filter(has=page.locator("td.field-user", has_text="adam"))
    adams_row.locator('select[name$="-role"]').select_option(Role.MEMBER)

    page.get_by_role("button", name="Save", exact=True).click()

    expect(page.locator(".errornote")).to_be_visible()
    row_error = adams_row.locator(".errorlist")
    expect(row_error).to_contain_text(f"{demo_org.name} would be left without an admin")
    expect(row_error).to_contain_text("Make someone else an admin first.")
    expect(page.locator(".messagelist")).to_have_count(0)  # no "changed successfully"
    shoot(page, "the-last-admin-is-told-why")
    assert Membership.objects.get(user__username="adam", organization=demo_org).role == Role.ADMIN

    page.goto(f"{live_server.url}/admin/")
    expect(page.locator("#content")).not_to_contain_text("authorized")


@pytest.mark.parametrize("width", WIDTHS)
def test_an_invitee_with_no_account_sets_a_password_and_is_signed_in_to_the_inbox(
    live_server: Any, demo_org: Organization, browser: Any, width: int
) -> None:
    admin_page = open_page(browser, width)
    sign_in_to_admin(admin_page, live_server.url, "adam")
    admin_page.goto(f"{live_server.url}/admin/tenancy/invitation/add/")
    # adam administers one organisation: it is chosen already; the invitee is named, not numbered.
    expect(admin_page.get_by_label("Organisation")).to_have_value(str(demo_org.pk))
    expect(admin_page.get_by_label("Username")).to_have_attribute("type", "text")
    admin_page.get_by_label("Email").fill("nina.ortiz@example.test")
    admin_page.get_by_label("Role").select_option(Role.APPROVER)
    admin_page.get_by_role("button", name="Save", exact=True).click()

    # One message, in order: what was made, that it went by e-mail, then the link shown once.
    message = admin_page.locator(".messagelist")
    expect(message.locator("li")).to_have_count(1)
    expect(message).to_contain_text(
        f"Invitation for nina.ortiz@example.test to {demo_org.name} as approver: sent by e-mail to "
        "nina.ortiz@example.test. The link below is shown only once"
    )
    expect(message).not_to_contain_text("added successfully")
    expect(message).to_contain_text(f"{live_server.url}/invitations/")  # the address the server runs on
    # Its state reads compactly: at most two lines ("waiting," / "7 days left"), no word split.
    state = admin_page.locator("#result_list td.field-state").first
    expect(state).to_have_text(re.compile(r"^waiting, \d+\s(days|day|hours) left$"))
    assert lines_of(state) <= 2 and broken_words(state) == []
    assert broken_words(admin_page.locator("#result_list thead")) == []
    shoot(admin_page, "invitation-made")
    link = re.search(r"https?://\S+/invitations/[\w-]+/", message.inner_text()).group(0)
    # The link copies with one click (or is selected, where the browser keeps the clipboard).
    copy = message.locator("button[data-copy=invitation-link]")
    expect(copy).to_have_text("Copy the link")
    copy.click()
    expect(copy).to_have_text(re.compile(r"^(Copied|Selected: press Ctrl\+C)$"))
    [sent] = mail.outbox
    assert link in sent.body

    page = open_page(browser, width)
    page.goto(link)
    expect(page.get_by_role("heading", name=f"Welcome to {demo_org.name}")).to_be_visible()
    expect(page.locator("#invitee-username")).to_have_text("nina.ortiz")
    shoot(page, "set-a-password")
    page.get_by_label("Password", exact=True).fill("tall-Otter-42")
    page.get_by_label("The same password again").fill("tall-Otter-42")
    page.get_by_role("button", name="Set password and join").click()

    expect(page).to_have_url(f"{live_server.url}/approvals/")
    expect(page.locator(".messages")).to_contain_text(f"You joined {demo_org.name} as approver.")
    expect(page.locator(".who")).to_contain_text("nina.ortiz")
    shoot(page, "signed-in-in-the-inbox")
    assert Membership.objects.filter(user__username="nina.ortiz", role=Role.APPROVER).exists()


@pytest.mark.parametrize("width", WIDTHS)
def test_someone_signed_in_opening_another_persons_invitation_is_told_whose_it_is(
    live_server: Any, demo_org: Organization, browser: Any, width: int
) -> None:
    from django.contrib.auth import get_user_model

    from tenancy.invitations import invitation_create

    adam = get_user_model().objects.get(username="adam")
    made = invitation_create(
        organization=demo_org, invited_by=adam, role=Role.APPROVER, email="nina@example.test",
        base_url=live_server.url,
    )  # fmt: skip
    page = open_page(browser, width)
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill(DEMO_PASSWORD)
    page.get_by_role("button", name=re.compile("Sign in|Log in")).click()

    page.goto(made.link)

    expect(page.locator("main")).to_contain_text(
        "This invitation is for nina@example.test; you are signed in as alice."
    )
    expect(page.locator("main")).not_to_contain_text("Go to the inbox")
    shoot(page, "someone-elses-invitation")
    page.get_by_role("button", name="Sign out to accept it").click()
    expect(page.get_by_role("heading", name=f"Welcome to {demo_org.name}")).to_be_visible()
