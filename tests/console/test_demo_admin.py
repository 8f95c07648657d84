"""Operators edit a connector's actions as people read them: a display name, what approvers see
of a call (a read action of the same connector and the fields of its answer, typed as a list),
on the demo's own connector."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from agents.demo import demo_setup
from agents.models import Connector, ConnectorAction
from tests.admin_kit import logged_in, page_text, url
from tests.console.test_admin_errors import form_data
from tests.personas import make_action, make_http_connector

pytestmark = pytest.mark.django_db


@pytest.fixture
def connector() -> Connector:
    demo_setup(base_url="http://127.0.0.1:8000")
    return Connector.objects.get(slug="oa")


@pytest.fixture
def oscar() -> Any:
    return get_user_model().objects.get(username="oscar")


def rows(response: Any) -> dict[str, Any]:
    """The action forms of a connector page, by action name."""
    formset = response.context["inline_admin_formsets"][0].formset
    return {form.instance.name: form for form in formset.forms if form.instance.pk}


def index_of(response: Any, name: str) -> int:
    return list(rows(response)).index(name)


def test_the_demo_actions_read_as_people_say_them_and_the_payment_shows_its_purchase(
    connector: Connector, oscar: Any
) -> None:
    titles = {action.name: action.title for action in connector.actions.all()}
    pay = connector.actions.get(name="purchase_pay")

    assert titles == {
        "purchase_list": "List purchases",
        "purchase_get": "Look up a purchase",
        "purchase_pay": "Pay a purchase",
        "purchase_create": "Raise a purchase order",
    }
    assert all(action.description for action in connector.actions.all())
    assert (pay.context_action.name, pay.context_fields) == (
        "purchase_get",
        ["vendor", "description", "amount", "currency"],
    )
    page = logged_in(oscar).get(url(Connector, "change", connector.pk))
    assert page.status_code == 200
    pay_row = rows(page)["purchase_pay"]
    assert pay_row["context_fields"].value() == "vendor, description, amount, currency"
    assert pay_row["display_name"].value() == "Pay a purchase"


def test_only_read_actions_of_the_same_connector_can_describe_a_call(
    connector: Connector, oscar: Any
) -> None:
    other = make_http_connector(connector.organization, "https://erp.example.test", slug="erp")
    foreign = make_action(other, "invoice_get", path="invoices/{id}")
    page = logged_in(oscar).get(url(Connector, "change", connector.pk))

    choices = [label for _, label in rows(page)["purchase_pay"].fields["context_action"].choices]
    assert choices == [
        "---------",
        "Look up a purchase (oa__purchase_get)",
        "List purchases (oa__purchase_list)",
    ]

    data = form_data(page)
    data[f"actions-{index_of(page, 'purchase_pay')}-context_action"] = str(foreign.pk)
    refused = logged_in(oscar).post(url(Connector, "change", connector.pk), data)
    assert refused.status_code == 200
    assert "Select a valid choice" in str(rows(refused)["purchase_pay"].errors["context_action"])
    assert connector.actions.get(name="purchase_pay").context_action.name == "purchase_get"


def test_an_operator_renames_an_action_and_lists_the_fields_approvers_see(
    connector: Connector, oscar: Any
) -> None:
    client = logged_in(oscar)
    page = client.get(url(Connector, "change", connector.pk))
    data = form_data(page)
    pay = index_of(page, "purchase_pay")
    data[f"actions-{pay}-display_name"] = "Settle a purchase"
    data[f"actions-{pay}-context_fields"] = " vendor,amount , currency,"

    response = client.post(url(Connector, "change", connector.pk), data)

    assert response.status_code == 302, rows(response)["purchase_pay"].errors
    saved = connector.actions.get(name="purchase_pay")
    assert (saved.title, saved.context_fields) == ("Settle a purchase", ["vendor", "amount", "currency"])


@pytest.mark.parametrize(
    ("fields", "context_action", "field", "message"),
    [
        ("vendor; amount", "keep", "context_fields", "Not a field name: vendor; amount."),
        (
            '["vendor", 3]',
            "keep",
            "context_fields",
            'Write the fields separated by commas: "vendor, amount".',
        ),
        ("vendor", "", "context_action", "Choose the action whose answer holds the fields approvers see."),
    ],
    ids=["not names", "json that is not a list of names", "fields without an action"],
)
def test_fields_approvers_cannot_see_are_refused_on_their_field_in_words(
    connector: Connector, oscar: Any, fields: str, context_action: str, field: str, message: str
) -> None:
    client = logged_in(oscar)
    page = client.get(url(Connector, "change", connector.pk))
    data = form_data(page)
    pay = index_of(page, "purchase_pay")
    data[f"actions-{pay}-context_fields"] = fields
    if context_action != "keep":
        data[f"actions-{pay}-context_action"] = context_action

    response = client.post(url(Connector, "change", connector.pk), data)

    assert response.status_code == 200
    assert any(message in error for error in rows(response)["purchase_pay"].errors[field])
    assert connector.actions.get(name="purchase_pay").context_fields == [
        "vendor",
        "description",
        "amount",
        "currency",
    ]
    assert "Traceback" not in page_text(response)


def test_a_context_action_given_as_json_is_read_as_the_list_it_is(connector: Connector, oscar: Any) -> None:
    client = logged_in(oscar)
    page = client.get(url(Connector, "change", connector.pk))
    data = form_data(page)
    data[f"actions-{index_of(page, 'purchase_pay')}-context_fields"] = '["vendor", "amount"]'

    assert client.post(url(Connector, "change", connector.pk), data).status_code == 302
    assert ConnectorAction.objects.get(connector=connector, name="purchase_pay").context_fields == [
        "vendor",
        "amount",
    ]
