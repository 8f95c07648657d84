"""What approvers read about a call: the tool's title and the call's business fields, read when
the request opens from the action's context action (through the connector, with its secrets),
else from the arguments; numbers written for people; the run's events carry the same."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import Client

from agents import events as ev
from agents.engine.runner import run_execute
from agents.models import RunEvent
from agents.services import run_start
from approvals import presentation
from approvals.models import ConfirmationRequest
from channels_im.cards import card_facts
from tests.approvals.kit import set_policy
from tests.personas import make_action, make_agent, make_http_connector, scripted

pytestmark = pytest.mark.django_db(transaction=True)

PURCHASE = {
    "id": "PO-1001",
    "vendor": "Lumen Office Supplies",
    "description": "200 reams of A4 paper and 12 toner cartridges",
    "amount": 1200.0,
    "currency": "USD",
    "status": "pending",
}
PAY_SCHEMA = {
    "type": "object",
    "properties": {
        "purchase_id": {"type": "string", "title": "Purchase"},
        "amount": {"type": "number", "description": "Exactly the purchase's amount."},
        "note": {"type": "string", "description": "Payment note"},
    },
    "required": ["purchase_id", "amount"],
}
PAY_ARGS = {"purchase_id": "PO-1001", "amount": 1200.0, "note": "Paid by the assistant"}


class Service(ThreadingHTTPServer):
    """The purchases service: ``GET /api/purchases/<id>`` answers the purchase (or what
    ``answer`` says: a status code, or seconds to hang)."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.received: list[tuple[str, str, str | None]] = []
        self.answer: Any = PURCHASE

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/api/"


class Handler(BaseHTTPRequestHandler):
    server: Service

    def do_GET(self) -> None:
        self.server.received.append(("GET", self.path, self.headers.get("X-Api-Key")))
        answer, status = self.server.answer, 200
        if isinstance(answer, float):
            time.sleep(answer)
            answer = PURCHASE
        elif isinstance(answer, int):
            answer, status = {"error": "down"}, answer
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def service() -> Iterator[Service]:
    server = Service()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def paying_agent(personas: Any, service: Service, *, context_fields: list[str] | None = None, **read: Any):
    """An agent whose ``oa__purchase_pay`` (flagged, titled "Pay a purchase") declares
    ``purchase_get`` as its context action, unless ``context_fields`` is empty."""
    oa = make_http_connector(personas.org, service.base_url, secrets={"headers": {"X-Api-Key": "k-123"}})
    read.setdefault("method", "GET")
    read.setdefault("path", "purchases/{purchase_id}")
    get = make_action(oa, "purchase_get", **read)
    pay = make_action(
        oa,
        "purchase_pay",
        method="POST",
        path="purchases/{purchase_id}/pay",
        parameters_schema=PAY_SCHEMA,
        display_name="Pay a purchase",
        context_action=get,
        context_fields=["vendor", "description", "amount"] if context_fields is None else context_fields,
    )
    config = scripted(
        {"tool_calls": [{"name": "oa__purchase_pay", "arguments": dict(PAY_ARGS)}]}, {"content": "Done."}
    )
    return make_agent(personas.org, personas.operator, actions=[pay], model_config_json=config)


def opened(personas: Any, agent: Any) -> ConfirmationRequest:
    """Run the agent until it parks on its approval (the real toolbox and connector)."""
    set_policy(personas)
    run = run_start(agent=agent, user=personas.member, input="pay PO-1001")
    assert async_to_sync(run_execute)(run.pk) == "awaiting_approval"
    return ConfirmationRequest.objects.get(run=run)


def test_a_request_shows_the_purchase_its_context_action_reads_through_the_connector(
    personas, service, resumes
) -> None:
    request = opened(personas, paying_agent(personas, service))

    assert request.tool_title == "Pay a purchase"
    assert request.context == [
        {"label": "Vendor", "value": "Lumen Office Supplies"},
        {"label": "Description", "value": "200 reams of A4 paper and 12 toner cartridges"},
        {"label": "Amount", "value": "1,200.00 USD"},
    ]
    # One GET of the purchase, with the connector's secret, and only the placeholder's argument.
    assert service.received == [("GET", "/api/purchases/PO-1001", "k-123")]
    assert request.tool_args == PAY_ARGS, "the exact arguments are kept"


def test_the_pending_event_carries_the_title_the_context_and_the_quorum(personas, service, resumes) -> None:
    request = opened(personas, paying_agent(personas, service))

    pending = RunEvent.objects.get(run=request.run, type=ev.APPROVAL_PENDING).payload
    assert pending["tool_title"] == "Pay a purchase" and pending["tool"] == "oa__purchase_pay"
    assert pending["context"][2] == {"label": "Amount", "value": "1,200.00 USD"}
    assert pending["approvals_required"] == 1 and pending["arguments"] == PAY_ARGS


@pytest.mark.parametrize(
    ("answer", "why"),
    [(500, "an error answer"), ({"id": "PO-1001"}, "none of the fields"), ("not json", "no object")],
)
def test_a_context_action_that_fails_falls_back_to_the_arguments_labelled_from_the_schema(
    personas, service, resumes, answer, why
) -> None:
    service.answer = answer

    request = opened(personas, paying_agent(personas, service))

    assert request.status == "pending", why
    assert request.context == [
        {"label": "Purchase", "value": "PO-1001", "argument": "purchase_id"},
        {"label": "Amount", "value": "1,200.00", "argument": "amount"},
        {"label": "Payment note", "value": "Paid by the assistant", "argument": "note"},
    ], why


def test_a_context_action_that_hangs_is_given_up_quickly_and_the_request_still_opens(
    personas, service, resumes, monkeypatch
) -> None:
    monkeypatch.setattr(presentation, "CONTEXT_TIMEOUT_SECONDS", 0.2)
    service.answer = 10.0  # seconds: far beyond the bound

    started = time.monotonic()
    request = opened(personas, paying_agent(personas, service))

    assert time.monotonic() - started < 8
    assert [item["label"] for item in request.context] == ["Purchase", "Amount", "Payment note"]


@pytest.mark.parametrize(
    "declared", [{"method": "POST"}, {"context_fields": []}], ids=["writes", "no-fields"]
)
def test_a_context_action_that_writes_or_shows_no_fields_is_never_called(
    personas, service, resumes, declared
) -> None:
    request = opened(personas, paying_agent(personas, service, **declared))

    assert service.received == []
    assert [item.get("argument") for item in request.context] == ["purchase_id", "amount", "note"]


def test_the_inbox_shows_the_context_and_the_arguments_for_people_and_keeps_the_json(
    personas, service, resumes
) -> None:
    request = opened(personas, paying_agent(personas, service))
    client = Client()
    client.force_login(personas.approver)

    page = client.get("/approvals/").content.decode()

    assert '<span class="tool">Pay a purchase</span>' in page
    assert "<dt>Vendor</dt><dd>Lumen Office Supplies</dd>" in page
    assert "<dt>Amount</dt><dd>1,200.00 USD</dd>" in page
    arguments = page.split('<dl class="kv arguments"')[1].split("</dl>")[0]
    assert "<dt>Purchase ID</dt><dd>PO-1001</dd>" in arguments
    assert "<dt>Amount</dt><dd>1,200.00 USD</dd>" in arguments, "in the currency the context gives"
    json_part = page.split('<details class="json">')[1].split("</details>")[0]
    assert "<code>oa__purchase_pay</code>" in json_part and "&quot;amount&quot;: 1200.0" in json_part
    assert str(request.pk) in page


def test_chat_cards_say_what_the_call_is_about(personas, service, resumes) -> None:
    facts = card_facts(opened(personas, paying_agent(personas, service)))

    assert facts.tool == "Pay a purchase" and facts.tool_name == "oa__purchase_pay"
    assert facts.waiting_lines[:3] == [
        "Vendor: Lumen Office Supplies",
        "Description: 200 reams of A4 paper and 12 toner cartridges",
        "Amount: 1,200.00 USD",
    ]


def test_numbers_read_the_same_everywhere() -> None:
    assert presentation.number_text(1200.0) == presentation.number_text(1200) == "1,200"
    assert presentation.number_text(1250.5) == "1,250.5"
    assert presentation.money_text(1200, "EUR") == "1,200.00 EUR"
    assert presentation.value_text(1200.0, key="total_amount") == "1,200.00"
    assert presentation.value_text(True) == "Yes" and presentation.value_text(None) == "—"
    assert presentation.value_text({"unit_price": 3, "currency": "USD", "qty": 2}) == (
        "Unit price: 3.00 USD; Qty: 2"
    )
    assert presentation.humanized_key("purchaseId") == "Purchase ID"
    assert presentation.title_of("oa__purchase_pay") == "Purchase pay"


def test_a_calls_amount_is_its_first_money_argument_in_its_currency() -> None:
    """What the inbox filters an amount range on, and what a batch's outcome page shows."""
    assert presentation.amount_of({"purchase_id": "PO-1", "amount": 1200}) == 1200
    assert presentation.amount_text({"amount": 1200, "currency": "USD"}) == "1,200.00 USD"
    assert presentation.amount_text({"total_price": "12.5"}) == ""  # a string is not an amount
    assert presentation.amount_text({"amount": float("nan")}) == ""
    assert presentation.amount_text({"trip": "Lyon", "nights": 2}) == ""


def test_an_amount_without_a_currency_takes_the_default_the_tools_schema_gives() -> None:
    """A purchase order of 60,000 reads "60,000.00 USD", as payments do, when its currency is the
    schema's default rather than an argument."""
    schema = {"properties": {"amount": {"type": "number"}, "currency": {"type": "string", "default": "USD"}}}
    rows = presentation.argument_rows({"vendor": "Contoso", "amount": 60000}, schema)
    assert {row["label"]: row["value"] for row in rows}["Amount"] == "60,000.00 USD"
    given = presentation.argument_rows({"amount": 5, "currency": "EUR"}, schema)
    assert [row["value"] for row in given] == ["5.00 EUR"]
    assert presentation.argument_rows({"amount": 5}, {"properties": {}})[0]["value"] == "5.00"
