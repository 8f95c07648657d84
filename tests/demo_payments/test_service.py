"""The demo payments service (a demo target, not part of the platform) and the demo set-up."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from agents.demo import demo_setup
from agents.llm.factory import check_model_config
from agents.models import Agent, Connector, ConnectorAction
from agents.tools.base import ToolError
from agents.tools.schema import check_parameters_schema
from agents.tools.toolbox import tools_for_agent
from demo_payments.models import Purchase
from demo_payments.services import purchase_seed_demo
from tenancy.models import Membership, Organization

API = "/demo/api/purchases"


@pytest.fixture
def purchases(db: None) -> list[Purchase]:
    return purchase_seed_demo()


def api(client: Client, method: str, path: str, body: Any = None, *, token: str | None = "default") -> Any:
    headers = (
        {}
        if token is None
        else {"X-Demo-Token": settings.DEMO_PAYMENTS_TOKEN if token == "default" else token}
    )
    if method == "GET":
        return client.get(path, headers=headers)
    return client.post(
        path,
        data=body if isinstance(body, str) else json.dumps(body),
        content_type="application/json",
        headers=headers,
    )


def test_the_purchase_list_is_a_json_list_with_numeric_amounts(
    client: Client, purchases: list[Purchase]
) -> None:
    response = api(client, "GET", API)
    assert response.status_code == 200
    listed = response.json()
    assert [purchase["id"] for purchase in listed] == ["PO-1001", "PO-1002", "PO-1003"]
    assert listed[0] == {
        "id": "PO-1001",
        "vendor": "Lumen Office Supplies",
        "description": "200 reams of A4 paper and 12 toner cartridges",
        "amount": 1200.0,
        "currency": "USD",
        "status": "pending",
        "paid_at": None,
        "paid_reference": None,
        "paid_note": None,
    }


def test_the_purchase_list_filters_by_status_and_refuses_an_unknown_one(
    client: Client, purchases: list[Purchase]
) -> None:
    pending = api(client, "GET", f"{API}?status=pending").json()
    paid = api(client, "GET", f"{API}?status=paid").json()
    assert [purchase["id"] for purchase in pending] == ["PO-1001", "PO-1002"]
    assert [(purchase["id"], purchase["paid_reference"]) for purchase in paid] == [
        ("PO-1003", "PAY-SEED1003")
    ]
    refused = api(client, "GET", f"{API}?status=lost")
    assert refused.status_code == 400
    assert refused.json()["error"] == "bad_status"


def test_one_purchase_is_served_by_id_and_an_unknown_one_is_404(
    client: Client, purchases: list[Purchase]
) -> None:
    assert api(client, "GET", f"{API}/PO-1002").json()["amount"] == 4800.0
    unknown = api(client, "GET", f"{API}/PO-9999")
    assert unknown.status_code == 404
    assert unknown.json() == {"error": "not_found", "detail": "no purchase 'PO-9999'"}


def test_paying_the_exact_amount_marks_the_purchase_paid(client: Client, purchases: list[Purchase]) -> None:
    response = api(client, "POST", f"{API}/PO-1001/pay", {"amount": 1200, "note": "March paper"})
    assert response.status_code == 200
    paid = response.json()
    assert paid["status"] == "paid"
    assert paid["paid_reference"].startswith("PAY-")
    assert paid["paid_note"] == "March paper"
    stored = Purchase.objects.get(pk="PO-1001")
    assert (stored.status, stored.paid_reference, stored.paid_at is not None) == (
        "paid",
        paid["paid_reference"],
        True,
    )


def test_a_float_amount_equal_to_the_purchase_amount_is_accepted(
    client: Client, purchases: list[Purchase]
) -> None:
    # What an agent sends back after reading the list: 350.5 for 350.50.
    Purchase.objects.filter(pk="PO-1003").update(status=Purchase.Status.PENDING)
    assert api(client, "POST", f"{API}/PO-1003/pay", {"amount": 350.5}).status_code == 200


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"amount": 1199.99}, "amount_mismatch"),
        ({"amount": "1200"}, "bad_request"),
        ({"amount": True}, "bad_request"),
        ({}, "bad_request"),
        ({"amount": 1200, "note": 5}, "bad_request"),
        ("not json", "bad_request"),
        ([1200], "bad_request"),
    ],
    ids=["another amount", "a string", "a boolean", "no amount", "a non-text note", "not json", "a list"],
)
def test_a_wrong_or_malformed_amount_is_refused_with_400(
    client: Client, purchases: list[Purchase], body: Any, error: str
) -> None:
    response = api(client, "POST", f"{API}/PO-1001/pay", body)
    assert response.status_code == 400
    assert response.json()["error"] == error
    assert Purchase.objects.get(pk="PO-1001").status == Purchase.Status.PENDING


def test_a_wrong_amount_answer_names_the_expected_amount(client: Client, purchases: list[Purchase]) -> None:
    answer = api(client, "POST", f"{API}/PO-1001/pay", {"amount": 12}).json()
    assert answer["expected"] == 1200.0
    assert "does not match" in answer["detail"]


def test_paying_twice_is_refused_with_409(client: Client, purchases: list[Purchase]) -> None:
    first = api(client, "POST", f"{API}/PO-1002/pay", {"amount": 4800})
    second = api(client, "POST", f"{API}/PO-1002/pay", {"amount": 4800})
    assert (first.status_code, second.status_code) == (200, 409)
    assert second.json()["error"] == "already_paid"
    assert first.json()["paid_reference"] in second.json()["detail"]


def test_a_slow_service_pays_at_once_and_answers_after_its_delay(
    client: Client, purchases: list[Purchase], settings: Any
) -> None:
    settings.DEMO_PAYMENTS_ANSWER_DELAY_SECONDS = 0.3
    started = time.monotonic()

    response = api(client, "POST", f"{API}/PO-1001/pay", {"amount": 1200})

    assert response.status_code == 200 and time.monotonic() - started >= 0.3
    assert Purchase.objects.get(pk="PO-1001").status == Purchase.Status.PAID


def test_paying_an_unknown_purchase_is_404(client: Client, purchases: list[Purchase]) -> None:
    response = api(client, "POST", f"{API}/PO-9999/pay", {"amount": 1})
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


@pytest.mark.parametrize("token", [None, "", "wrong-token"], ids=["missing", "empty", "wrong"])
def test_the_api_without_the_right_token_is_401(
    client: Client, purchases: list[Purchase], token: str | None
) -> None:
    for method, path, body in [
        ("GET", API, None),
        ("GET", f"{API}/PO-1001", None),
        ("POST", f"{API}/PO-1001/pay", {"amount": 1200}),
    ]:
        response = api(client, method, path, body, token=token)
        assert response.status_code == 401
        assert response.json()["error"] == "unauthorised"
    assert Purchase.objects.get(pk="PO-1001").status == Purchase.Status.PENDING


def test_paying_needs_no_csrf_token(purchases: list[Purchase]) -> None:
    strict = Client(enforce_csrf_checks=True)
    assert api(strict, "POST", f"{API}/PO-1001/pay", {"amount": 1200}).status_code == 200


def test_the_html_page_lists_the_purchases_and_says_it_is_a_demo_target(
    client: Client, purchases: list[Purchase]
) -> None:
    response = client.get("/demo/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "Demo target service — not part of the platform" in page
    for purchase_id in ("PO-1001", "PO-1002", "PO-1003"):
        assert purchase_id in page
    assert "3 purchases, 2 pending." in page


def test_creating_a_purchase_numbers_it_after_the_highest_and_leaves_it_pending(
    client: Client, purchases: list[Purchase]
) -> None:
    body = {"vendor": "Contoso", "amount": 60000, "description": "40 laptops"}

    first, second = api(client, "POST", API, body), api(client, "POST", API, {**body, "currency": "eur"})

    assert (first.status_code, second.status_code) == (201, 201)
    assert first.json() | {"paid_at": None} == {
        "id": "PO-1004",
        "vendor": "Contoso",
        "description": "40 laptops",
        "amount": 60000.0,
        "currency": "USD",
        "status": "pending",
        "paid_at": None,
        "paid_reference": None,
        "paid_note": None,
    }
    assert (second.json()["id"], second.json()["currency"]) == ("PO-1005", "EUR")


@pytest.mark.parametrize(
    "body",
    [
        {"amount": 10},
        {"vendor": " ", "amount": 10},
        {"vendor": "Contoso", "amount": 0},
        {"vendor": "Contoso", "amount": 10.001},
        {"vendor": "Contoso", "amount": 1e12},
        {"vendor": "Contoso", "amount": "10"},
        {"vendor": "Contoso", "amount": 10, "currency": "dollars"},
        {"vendor": "Contoso", "amount": 10, "description": 5},
        [1],
        "not json",
    ],
    ids=["no vendor", "blank vendor", "zero", "below a cent", "too large", "text amount", "bad currency",
         "non-text description", "a list", "not json"],
)  # fmt: skip
def test_a_malformed_purchase_is_refused_with_400_and_nothing_is_created(
    client: Client, purchases: list[Purchase], body: Any
) -> None:
    response = api(client, "POST", API, body)

    assert response.status_code == 400 and response.json()["error"] == "bad_request"
    assert Purchase.objects.count() == 3


def test_creating_a_purchase_needs_the_token(client: Client, purchases: list[Purchase]) -> None:
    response = api(client, "POST", API, {"vendor": "Contoso", "amount": 10}, token="wrong")

    assert response.status_code == 401 and Purchase.objects.count() == 3


def test_seeding_again_removes_the_purchases_created_since(client: Client, purchases: list[Purchase]) -> None:
    api(client, "POST", API, {"vendor": "Contoso", "amount": 10})

    purchase_seed_demo()

    assert list(Purchase.objects.values_list("id", flat=True)) == ["PO-1001", "PO-1002", "PO-1003"]


def test_the_html_page_says_how_to_reset_the_demo(client: Client, purchases: list[Purchase]) -> None:
    page = client.get("/demo/").content.decode()

    assert "<code>manage.py demo_setup</code> puts the purchases" in page
    assert "1,200.00 USD" in page


# --- the demo set-up ---------------------------------------------------------------------------------


def counts() -> dict[str, int]:
    return {
        model.__name__: model.objects.count()
        for model in (Organization, get_user_model(), Membership, Connector, ConnectorAction, Agent, Purchase)
    }


def test_demo_setup_is_idempotent(db: None) -> None:
    first = demo_setup(base_url="http://testserver")
    after_first = counts()
    Purchase.objects.filter(pk="PO-1001").update(status=Purchase.Status.PAID, paid_reference="PAY-X")
    second = demo_setup(base_url="http://testserver")
    assert counts() == after_first
    assert after_first[Purchase.__name__] == 3
    assert first == second
    assert Purchase.objects.get(pk="PO-1001").status == Purchase.Status.PENDING  # refreshed for the next demo


def test_demo_setup_wires_the_connector_actions_and_scripted_agent(db: None) -> None:
    summary = demo_setup(base_url="http://127.0.0.1:8123/")
    assert set(summary) == {"organization", "users", "agent", "seeded"}
    agent = Agent.objects.get(pk=summary["agent"]["id"])
    assert (agent.name, agent.owner.username) == ("Procurement assistant", "oscar")
    connector = Connector.objects.get(slug="oa")  # read back: secrets come out of the encrypted field
    assert connector.name == "Demo payments (OA)"
    assert connector.base_url == "http://127.0.0.1:8123/demo/api/"
    assert connector.secrets == {"headers": {"X-Demo-Token": settings.DEMO_PAYMENTS_TOKEN}}
    tools = tools_for_agent(agent)
    assert list(tools) == [
        "oa__purchase_create",
        "oa__purchase_get",
        "oa__purchase_list",
        "oa__purchase_pay",
        "current_time",
        "calculator",
    ]
    pay = tools["oa__purchase_pay"].spec
    assert (pay.requires_confirmation, pay.is_write) == (True, True)
    assert pay.parameters["required"] == ["purchase_id", "amount"]
    check_model_config(agent.model_config_json)
    for action in ConnectorAction.objects.filter(connector=connector):
        check_parameters_schema(action.parameters_schema)


def test_the_demo_connector_lists_and_pays_over_real_http(live_server: Any) -> None:
    """The demo agent's two calls, through the platform's HTTP tools against the served API."""
    agent = Agent.objects.get(pk=demo_setup(base_url=live_server.url)["agent"]["id"])
    tools = tools_for_agent(agent)
    pending = asyncio.run(tools["oa__purchase_list"].run({"status": "pending"}))
    assert [(purchase["id"], purchase["amount"]) for purchase in pending] == [
        ("PO-1001", 1200.0),
        ("PO-1002", 4800.0),
    ]
    # What the script sends: "$last.0.id" and "$last.0.amount", read back from the JSON observation.
    first = json.loads(json.dumps(pending))[0]
    paid = asyncio.run(tools["oa__purchase_pay"].run({"purchase_id": first["id"], "amount": first["amount"]}))
    assert (paid["id"], paid["status"]) == ("PO-1001", "paid")
    with pytest.raises(ToolError, match=r"^POST purchases/PO-1001/pay answered 409: .*already_paid"):
        asyncio.run(tools["oa__purchase_pay"].run({"purchase_id": "PO-1001", "amount": 1200.0}))
