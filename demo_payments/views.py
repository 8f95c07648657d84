"""Demo target service — not part of the platform: its JSON API and its one HTML page.

API (under ``/demo/api/``, every call needs the header ``X-Demo-Token: <DEMO_PAYMENTS_TOKEN>``,
else 401):

* ``GET purchases[?status=pending|paid]`` → a JSON list of purchases (see :func:`purchase_json`);
* ``POST purchases`` with ``{"vendor": "<name>", "amount": <number>, "description": "<optional>",
  "currency": "<optional, USD>"}`` → 201 and the new pending purchase; 400 when malformed;
* ``GET purchases/<id>`` → one purchase, 404 when unknown;
* ``POST purchases/<id>/pay`` with ``{"amount": <number>, "note": "<optional>"}`` → the paid
  purchase; 400 when the body is malformed or the amount differs, 404 unknown, 409 already paid.

Errors are ``{"error": "<code>", "detail": "<sentence>"}`` (plus ``"expected"`` for a wrong amount).
"""

from __future__ import annotations

import asyncio
import hmac
from decimal import Decimal
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from demo_payments import selectors, services
from demo_payments.models import Purchase
from fimone.parsers import InvalidJSON
from fimone.parsers import loads as json_loads

TOKEN_HEADER = "X-Demo-Token"  # noqa: S105 - a header name, not a secret


def purchase_json(purchase: Purchase) -> dict[str, Any]:
    """The API's view of a purchase. ``amount`` is a JSON number so a client can send it back as is."""
    return {
        "id": purchase.id,
        "vendor": purchase.vendor,
        "description": purchase.description,
        "amount": float(purchase.amount),
        "currency": purchase.currency,
        "status": purchase.status,
        "paid_at": purchase.paid_at.isoformat() if purchase.paid_at else None,
        "paid_reference": purchase.paid_reference or None,
        "paid_note": purchase.paid_note or None,
    }


def _error(status: int, code: str, detail: str, **extra: Any) -> JsonResponse:
    return JsonResponse({"error": code, "detail": detail, **extra}, status=status)


def _unauthorised(request: HttpRequest) -> JsonResponse | None:
    expected = settings.DEMO_PAYMENTS_TOKEN or ""
    given = request.headers.get(TOKEN_HEADER, "")
    # compare_digest: the comparison takes as long whatever prefix matches.
    if expected and hmac.compare_digest(given.encode(), expected.encode()):
        return None
    return _error(401, "unauthorised", f"send the demo token in the {TOKEN_HEADER} header")


@csrf_exempt  # a machine API authenticated by its token header, not a browser form
@require_http_methods(["GET", "POST"])
def purchase_list_api(request: HttpRequest) -> JsonResponse:
    """``GET`` lists the purchases, ``POST`` creates one."""
    if (refused := _unauthorised(request)) is not None:
        return refused
    if request.method == "POST":
        return _create(request)
    status = request.GET.get("status") or None
    if status is not None and status not in Purchase.Status.values:
        return _error(400, "bad_status", f"status must be one of {', '.join(Purchase.Status.values)}")
    purchases = selectors.purchase_list(status=status)
    return JsonResponse([purchase_json(purchase) for purchase in purchases], safe=False)


def _create(request: HttpRequest) -> JsonResponse:
    try:
        body = json_loads(request.body or b"null", parse_float=Decimal)
    except InvalidJSON as exc:
        return _error(400, "bad_request", f"the body must be JSON: {exc}")
    if not isinstance(body, dict):
        return _error(
            400, "bad_request", 'the body must be a JSON object like {"vendor": "Contoso", "amount": 12.5}'
        )
    amount, vendor = body.get("amount"), body.get("vendor")
    if isinstance(amount, bool) or not isinstance(amount, int | Decimal):
        return _error(400, "bad_request", "amount must be a number")
    texts = {key: body.get(key, default) for key, default in (("description", ""), ("currency", "USD"))}
    if not isinstance(vendor, str) or not all(isinstance(value, str) for value in texts.values()):
        return _error(400, "bad_request", "vendor, description and currency must be text")
    try:
        purchase = services.purchase_create(vendor=vendor, amount=Decimal(amount), **texts)
    except services.InvalidPurchase as exc:
        return _error(400, exc.code, str(exc))
    return JsonResponse(purchase_json(purchase), status=201)


@require_GET
def purchase_detail_api(request: HttpRequest, purchase_id: str) -> JsonResponse:
    if (refused := _unauthorised(request)) is not None:
        return refused
    purchase = selectors.purchase_get(purchase_id=purchase_id)
    if purchase is None:
        return _error(404, "not_found", f"no purchase {purchase_id!r}")
    return JsonResponse(purchase_json(purchase))


@csrf_exempt  # a machine API authenticated by its token header, not a browser form
@require_POST
async def purchase_pay_api(request: HttpRequest, purchase_id: str) -> JsonResponse:
    """Pay, then answer ``DEMO_PAYMENTS_ANSWER_DELAY_SECONDS`` later (0 by default): a slow
    payment provider whose payment is made even if the caller stops waiting for the answer.
    The wait is asynchronous, so a slow answer holds no thread of the server."""
    answer = await sync_to_async(_pay)(request, purchase_id)
    if settings.DEMO_PAYMENTS_ANSWER_DELAY_SECONDS and answer.status_code == 200:
        await asyncio.sleep(settings.DEMO_PAYMENTS_ANSWER_DELAY_SECONDS)
    return answer


def _pay(request: HttpRequest, purchase_id: str) -> JsonResponse:
    if (refused := _unauthorised(request)) is not None:
        return refused
    try:
        # Decimal, not float: the amount is compared with the stored amount to the cent.
        body = json_loads(request.body or b"null", parse_float=Decimal)
    except InvalidJSON as exc:
        return _error(400, "bad_request", f"the body must be JSON: {exc}")
    if not isinstance(body, dict):
        return _error(400, "bad_request", 'the body must be a JSON object like {"amount": 12.5}')
    amount = body.get("amount")
    if isinstance(amount, bool) or not isinstance(amount, int | Decimal) or not Decimal(amount).is_finite():
        return _error(400, "bad_request", "amount must be a number")
    note = body.get("note") or ""
    if not isinstance(note, str):
        return _error(400, "bad_request", "note must be a string")
    try:
        purchase = services.purchase_pay(purchase_id=purchase_id, amount=Decimal(amount), note=note)
    except services.PurchaseNotFound as exc:
        return _error(404, exc.code, str(exc))
    except services.PurchaseAlreadyPaid as exc:
        return _error(409, exc.code, str(exc))
    except services.AmountMismatch as exc:
        return _error(400, exc.code, str(exc), expected=float(exc.expected))
    return JsonResponse(purchase_json(purchase))


@require_GET
def purchase_page(request: HttpRequest) -> HttpResponse:
    purchases = list(selectors.purchase_list())
    return render(
        request,
        "demo_payments/purchase_list.html",
        {
            "purchases": purchases,
            "pending": sum(1 for purchase in purchases if purchase.status == Purchase.Status.PENDING),
        },
    )
