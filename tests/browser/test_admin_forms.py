"""The admin explains itself, in a real browser at a laptop's and a phone's width (issue 23,
"Operator"): a violated rule reads in plain language on its field, among labels in plain words; the
agent's model is a form, not JSON; a hook change shows on the agent's History page with what
changed and who changed it, no word split in two; the header links to the inbox and the approval
history for those who use them, "Log out" as legible as they are; a connector action's fields say
what they mean.

Screenshots go where every browser test's go (tests/browser/shots.py)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from agents.demo import DEMO_AGENT_NAME, demo_setup
from agents.models import Agent, Connector, HookDeclaration
from approvals.models import ApproverPolicy
from tenancy.models import Membership, Organization
from tests.browser.admin_pages import WIDTHS, broken_words, lines_of, open_page, overflows, sign_in_to_admin
from tests.browser.shots import screens_folder, shoot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo_org() -> Organization:
    demo_setup(base_url="http://127.0.0.1:8000")
    return Membership.objects.select_related("organization").get(user__username="oscar").organization


@pytest.mark.parametrize("width", WIDTHS)
def test_a_timeout_under_ten_seconds_is_refused_in_plain_language_on_the_timeout_field(
    live_server: Any, demo_org: Organization, browser: Any, width: int
) -> None:
    policy, _ = ApproverPolicy.objects.get_or_create(organization=demo_org, agent=None)
    page = open_page(browser, width)
    sign_in_to_admin(page, live_server.url, "oscar")
    page.goto(f"{live_server.url}/admin/approvals/approverpolicy/{policy.pk}/change/")

    page.locator("#id_timeout_seconds").fill("5")
    page.get_by_role("button", name="Save", exact=True).click()

    field = page.locator(".form-row.field-timeout_seconds")
    expect(field.locator(".errorlist")).to_have_text("Timeout: at least 10 seconds.")
    expect(page.locator("#content")).not_to_contain_text("approverpolicy_timeout_min")
    expect(page.locator("#content")).not_to_contain_text("Constraint")
    # Labels in plain words, no code's names; the named-users picker in lower case, as Django's own.
    expect(page.get_by_label("The organisation's approvers may decide")).to_be_checked()
    expect(page.get_by_label("Wait before suspending the run (seconds)")).to_be_visible()
    for internal in ("Allow org approvers", "Inline wait seconds", "Channel config", "Allow initiator"):
        expect(page.locator("#content")).not_to_contain_text(internal)
    # Named users: a box to tick per approver, on one short line.
    named = page.locator(".form-row.field-named_users").first
    expect(named.get_by_label("april")).not_to_be_checked()
    assert named.bounding_box()["height"] < 200
    # The escalation tiers' column titles keep their words whole ("DELETE?", not "DELET E?").
    tier_titles = page.locator("#tiers-group thead")
    assert broken_words(tier_titles) == []
    shoot(page, "timeout-refused-on-its-field")
    policy.refresh_from_db()
    assert policy.timeout_seconds != 5


@pytest.mark.parametrize("width", WIDTHS)
def test_the_agents_model_is_a_form_and_its_hook_changes_show_in_its_history(
    live_server: Any, demo_org: Organization, browser: Any, width: int
) -> None:
    agent = Agent.objects.get(name=DEMO_AGENT_NAME)
    page = open_page(browser, width)
    sign_in_to_admin(page, live_server.url, "oscar")
    page.goto(f"{live_server.url}/admin/agents/agent/{agent.pk}/change/")

    provider = page.get_by_label("Provider")
    expect(provider).to_have_value("scripted")
    expect(page.get_by_label("Script")).to_be_visible()
    expect(page.locator("#id_model_config_json__model")).to_be_hidden()
    expect(page.get_by_label("Calculator")).to_be_visible()
    expect(page.locator(".field-delegates, fieldset", has_text="Delegation")).not_to_contain_text(
        "AGENT_DELEGATION_MAX_DEPTH"
    )
    shoot(page, "agent-model-as-a-form")
    provider.select_option("openai")
    expect(page.locator("#id_model_config_json__model")).to_be_visible()
    expect(page.get_by_label("Base URL")).to_be_visible()
    expect(page.get_by_label("Temperature")).to_be_visible()
    expect(page.get_by_label("Script")).to_be_hidden()
    page.locator(".config-editor").screenshot(path=str(screens_folder() / f"model-form-openai-{width}.png"))
    provider.select_option("scripted")

    page.get_by_role("button", name="Add another hook").click()
    row = page.locator(".inline-related.last-related.dynamic-hook_declarations").last
    row.locator('select[name$="-hook"]').select_option("deny_tools")
    params = row.locator('.hook-params[data-hook="deny_tools"]')
    params.locator('[name$="__tools"]').fill("oa__purchase_create")
    params.locator('[name$="__message"]').fill("Purchases are created in the ERP.")
    page.get_by_role("button", name="Save and continue editing").click()
    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    assert HookDeclaration.objects.filter(agent=agent, name="deny_tools").exists()

    page.get_by_role("link", name="History", exact=True).click()

    entry = page.locator("tr.history-entry", has_text="Created: hook deny_tools")
    expect(entry.locator("td.history-who")).to_have_text("oscar")
    expect(entry).to_contain_text("Parameters — tools: oa__purchase_create")
    expect(entry).to_contain_text("Parameters — message: Purchases are created in the ERP.")
    # The demo's own hook was set up by a script, not by someone signed in: said so, not "—".
    seeded = page.locator("tr.history-entry", has_text="Created: hook confirm_when").locator("td.history-who")
    expect(seeded).to_have_text("system")
    assert HookDeclaration.history.filter(name="confirm_when", history_user__isnull=True).exists()
    history = page.locator("#change-history")
    assert broken_words(history) == [], "no word split across two lines (“osc ar”, “confirm_whe n”)"
    for cell in ("td.history-who", "td.history-when"):
        assert lines_of(entry.locator(cell)) == 1, cell
    assert overflows(page.locator("#content-main")) == []
    shoot(page, "agent-history-with-the-hook-change")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_header_links_to_the_inbox_and_the_history_for_those_who_use_them(
    live_server: Any, demo_org: Organization, browser: Any, width: int
) -> None:
    oscar = open_page(browser, width)
    sign_in_to_admin(oscar, live_server.url, "oscar")
    tools = oscar.locator("#user-tools")
    # oscar configures approvals but never decides one: no inbox to promise him decisions.
    expect(tools.get_by_role("link", name=re.compile(r"^Inbox"))).to_have_count(0)
    expect(tools.get_by_role("link", name="Approval history")).to_be_visible()
    # "Log out" (a button) is as legible on the blue header as the links beside it.
    look = "(el) => ['color', 'fontWeight', 'opacity'].map((name) => getComputedStyle(el)[name])"
    log_out = tools.get_by_role("button", name="Log out")
    assert log_out.evaluate(look) == tools.get_by_role("link", name="Approval history").evaluate(look)
    shoot(oscar, "admin-home-as-oscar")
    tools.get_by_role("link", name="Approval history").click()
    expect(oscar.locator("main")).not_to_contain_text("Not allowed")
    shoot(oscar, "approval-history-as-oscar")

    aude = open_page(browser, width)
    sign_in_to_admin(aude, live_server.url, "aude")
    expect(aude.locator("#user-tools").get_by_role("link", name="Approval history")).to_be_visible()
    expect(aude.locator("#user-tools").get_by_role("link", name="Inbox (0)")).to_have_count(0)
    shoot(aude, "admin-home-as-aude")


@pytest.mark.parametrize("width", WIDTHS)
def test_a_connector_actions_fields_say_what_they_mean(
    live_server: Any, demo_org: Organization, browser: Any, width: int
) -> None:
    connector = Connector.objects.get(organization=demo_org, slug="oa")
    page = open_page(browser, width)
    sign_in_to_admin(page, live_server.url, "oscar")
    page.goto(f"{live_server.url}/admin/agents/connector/{connector.pk}/change/")

    pay = page.locator(".inline-related", has=page.locator('input[value="purchase_pay"]'))
    # The heading keeps its space after the colon, also where Django lays it out as a flex box.
    heading = pay.locator("h3").first
    title, label = heading.locator("b").bounding_box(), heading.locator(".inline_label").bounding_box()
    assert label["x"] - (title["x"] + title["width"]) >= 3, "“Connector action: oa__purchase_pay”"
    # The example is an example, not the action's value; "Is write" is said in words.
    expect(pay.locator(".field-display_name .help")).to_contain_text(
        "The name people read for this tool, e.g."
    )
    expect(pay.get_by_label("Changes data")).to_be_visible()
    expect(pay).not_to_contain_text("Is write")
    pay.get_by_text("What approvers see").click()
    expect(pay).to_contain_text("For example, a payment's card can show the purchase it pays")
    expect(pay).not_to_contain_text("the purchase a payment pays, say")
    assert overflows(pay) == []
    pay.screenshot(path=str(screens_folder() / f"pay-action-{width}.png"))
    shoot(page, "connector-actions")


@pytest.mark.parametrize("width", WIDTHS)
def test_a_stages_conditions_are_rows_said_back_in_words_and_saved_as_typed(
    live_server: Any, demo_org: Organization, browser: Any, width: int
) -> None:
    from approvals.models import ApprovalStage, ApproverPolicy

    policy = ApproverPolicy.objects.get(organization=demo_org, agent=None)
    oscar = open_page(browser, width)
    sign_in_to_admin(oscar, live_server.url, "oscar")
    oscar.goto(f"{live_server.url}/admin/approvals/approverpolicy/{policy.pk}/change/")

    lead = oscar.locator("#stages-0").locator(".condition-rows")
    expect(oscar.locator("#stages-0 input[name$='-name']")).to_have_value("Team lead")
    expect(lead.get_by_label("Field 1")).to_have_value("amount")
    expect(lead.get_by_label("Operator 1")).to_have_value(">=")
    expect(lead.locator(".condition-words")).to_have_text("When Amount is at least 50,000.")
    lead.get_by_label("Value 1").fill("40,000")
    lead.get_by_label("Field 2").fill("vendor")
    lead.get_by_label("Operator 2").select_option("!=")
    lead.get_by_label("Value 2").fill("Contoso")
    expect(lead.locator(".condition-words")).to_have_text(
        "When Amount is at least 40,000 and Vendor is not Contoso."
    )
    assert overflows(lead) == [], "the rows fit the screen"
    shoot(oscar, "stage-conditions-as-rows")
    oscar.get_by_role("button", name="Save", exact=True).click()
    expect(oscar.locator(".messagelist")).to_contain_text("was changed successfully")

    stage = ApprovalStage.objects.get(policy=policy, name="Team lead")
    assert stage.conditions == [
        {"field": "amount", "op": ">=", "value": 40000},
        {"field": "vendor", "op": "!=", "value": "Contoso"},
    ]
