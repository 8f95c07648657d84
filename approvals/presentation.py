"""What a tool call is about, as approvers read it: the tool's title, its business fields (the
request's ``context``) and its values written for people.

A request's ``context`` is a list of ``{"label", "value"}`` (both text), read once when the request
opens (:func:`call_facts`, then :func:`context_read` on the event loop):

* if the tool's connector action names a ``context_action`` (a GET of the same connector) and
  ``context_fields``, that action is called with the call's arguments for its path's placeholders,
  through the same tool code as any call (:class:`agents.tools.http.HttpActionTool`: the egress
  guard and the connector's secrets apply), within :data:`CONTEXT_TIMEOUT_SECONDS`; the listed
  fields of its answer are the context. Any failure (an error answer, a timeout, a field that is
  not there) falls back to the arguments: reading the context never fails the request;
* otherwise the call's arguments, labelled from the parameter schema (a ``title``, else a short
  ``description``, else the key made readable); those items also carry ``"argument"``: the key
  they show, so a page can show the arguments as they are now (an approver may have changed them).

Values are written for people (:func:`value_text`): numbers with thousands separators and no
stray ``.0``, an amount with two decimals and, when the same object holds one, its currency
("1,200.00 USD"). The exact JSON stays on the request for whoever needs it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from django.utils import dateformat, timezone

from agents.models import Agent, Connector, ConnectorAction
from agents.tools.base import Tool, readable_tool_name
from agents.tools.http import PLACEHOLDER_RE, HttpActionTool
from agents.tools.toolbox import tools_for_agent
from hooks.conditions import OP_PHRASES

log = logging.getLogger(__name__)

CONTEXT_TIMEOUT_SECONDS = 3.0
"""How long opening a request waits for its context action at most (less if the connector's own
timeout is shorter): an approver would rather see the arguments now than the purchase later."""
MAX_VALUE_CHARS = 300
"""A value longer than this is cut (a description, a note): the exact text stays in the JSON."""
MAX_ITEMS = 20
"""Context items kept at most."""
MAX_LABEL_WORDS = 3
"""A parameter's description is its label only when it is this short ("Vendor name")."""

MONEY_KEYS = frozenset({"amount", "price", "total", "cost", "fee", "sum", "balance"})
"""Keys whose numbers are sums of money: written with two decimals, and their currency if known."""
CURRENCY_KEYS = ("currency", "currency_code")
_ACRONYMS = {"id": "ID", "url": "URL", "po": "PO", "iban": "IBAN", "vat": "VAT", "sku": "SKU", "api": "API"}
_CAMEL_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


# --- values for people ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)  # a tool's few keys, met on every row of a record or an export
def humanized_key(key: str) -> str:
    """A JSON key as a label: ``purchase_id`` → "Purchase ID", ``vendorName`` → "Vendor name"."""
    words = _CAMEL_RE.sub(" ", str(key)).replace("_", " ").replace("-", " ").replace(".", " ").split()
    if not words:
        return str(key)
    words = [_ACRONYMS.get(word.lower(), word.lower()) for word in words]
    first = words[0]
    return " ".join([first[:1].upper() + first[1:], *words[1:]])


@functools.lru_cache(maxsize=1024)
def is_money_key(key: str) -> bool:
    """Whether ``key`` names a sum of money (``amount``, ``total_amount``, ``unitPrice`` …)."""
    words = {w.lower() for w in re.split(r"[\s_.-]+", _CAMEL_RE.sub(" ", str(key))) if w}
    return bool(words & MONEY_KEYS)


def amount_of(args: Any) -> Decimal | None:
    """The sum of money a call is about: its first top-level argument whose key names one
    (:func:`is_money_key`) and whose value is a number; ``None`` when it has none."""
    if not isinstance(args, dict):
        return None
    for key, value in args.items():
        amount = _decimal(value) if is_money_key(key) and not isinstance(value, str) else None
        if amount is not None:
            return amount
    return None


def amount_text(args: Any) -> str:
    """The call's sum of money (:func:`amount_of`) with the arguments' currency, "1,200.00 USD";
    empty when it has none."""
    amount = amount_of(args)
    return money_text(amount, _currency_of(args)) if amount is not None else ""


#: A standing approval's scope in words.
SCOPE_TEXT = {"conversation": "in one conversation", "agent": "in every conversation of the agent"}


def conditions_text(rows: Any, *, labels: dict[str, str] | None = None, currency: str | None = None) -> str:
    """Conditions on a call's arguments as people read them, all holding: "Amount is at most
    4,800.00 USD and Vendor is Northwind Cloud" — each field by its label (``labels``, else its
    key made readable), sums of money in ``currency`` when one is known."""
    if not isinstance(rows, list):
        return value_text(rows)
    said = []
    for row in rows:
        if not isinstance(row, dict):
            said.append(value_text(row))
            continue
        key, op, value = str(row.get("field", "")), str(row.get("op", "")), row.get("value")
        if currency and is_money_key(key) and _decimal(value) is not None and not isinstance(value, str):
            shown = money_text(value, currency)
        elif isinstance(value, list):
            shown = ", ".join(value_text(v) for v in value)
        else:
            shown = value_text(value)
        said.append(f"{(labels or {}).get(key) or humanized_key(key)} {OP_PHRASES.get(op, op)} {shown}")
    return " and ".join(said)


#: What an id looks like: a short token, no spaces or markup ("PO-1002", "42", "inv/2026-0012").
_IDENTIFIER = re.compile(r"[\w.:/#-]{1,40}")


def identifier_of(args: Any) -> str:
    """A call's own id, if it has one: its first top-level argument named an id (``purchase_id``,
    ``orderId``) whose value looks like one (:data:`_IDENTIFIER`: "PO-1002"); empty otherwise."""
    if isinstance(args, dict):
        for key, value in args.items():
            if humanized_key(key).split()[-1] != "ID" or isinstance(value, bool):
                continue
            text = str(value).strip() if isinstance(value, str | int) else ""
            if _IDENTIFIER.fullmatch(text):
                return text
    return ""


def subject_of(args: Any) -> str:
    """What a call is about in a word or two, for one-line notices: its id (:func:`identifier_of`),
    else its sum of money ("1,200.00 USD"); empty when it has neither."""
    return identifier_of(args) or amount_text(args)


#: How long a value may be to stand in a record's one-line summary of a call.
SUMMARY_VALUE_CHARS = 40


def summary_of(args: Any, context: Any) -> str:
    """What a call is about in one line for a record's row: its id, then the short facts its
    context gives (vendor, amount with currency …), else its amount: at most three values,
    "PO-1001 · Lumen Office Supplies · 1,200.00 USD"; empty when nothing short says it."""
    values: list[str] = []

    def add(value: Any) -> None:
        text = " ".join(str(value).split())
        if text and text != "—" and len(text) <= SUMMARY_VALUE_CHARS and text not in values:
            values.append(text)

    add(identifier_of(args))
    for item in context if isinstance(context, list) else []:
        if isinstance(item, dict) and not item.get("argument"):
            add(item.get("value", ""))
    amount = amount_text(args)
    if amount and not any(value.startswith(amount.split()[0]) for value in values):
        add(amount)
    return " · ".join(values[:3])


def _decimal(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        return None
    try:
        number = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        return None
    return number if number.is_finite() else None


def number_text(value: Any, *, money: bool = False) -> str:
    """A number as people read it: ``1200.0`` → "1,200", ``1250.5`` → "1,250.5"; with ``money``,
    two decimals: "1,200.00". Anything that is not a number is returned as text."""
    number = _decimal(value)
    if number is None:
        return str(value)
    if money:
        return f"{number.quantize(Decimal('0.01')):,.2f}"
    if number == number.to_integral_value():
        return f"{int(number):,}"
    return f"{number.normalize():,f}"


def money_text(amount: Any, currency: Any = None) -> str:
    """ "1,200.00 USD"; without a currency "1,200.00"."""
    text = number_text(amount, money=True)
    currency = str(currency).strip() if isinstance(currency, str) else ""
    return f"{text} {currency}" if currency else text


def _cut(text: str) -> str:
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def value_text(value: Any, *, key: str = "", depth: int = 0) -> str:
    """``value`` as one line of text for people: numbers formatted (:func:`number_text`, as money
    when ``key`` names money), yes / no, lists joined by commas, objects as "Label: value; …",
    nothing as "—". Cut at :data:`MAX_VALUE_CHARS`."""
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return "Yes" if value else "No"
    if isinstance(value, int | float | Decimal):
        return number_text(value, money=is_money_key(key))
    if isinstance(value, str):
        return _cut(value)
    if depth >= 2:  # deeper structures stay JSON (cut): nobody reads a tree in one line
        return _cut(json.dumps(value, ensure_ascii=False, sort_keys=True, default=str))
    if isinstance(value, list):
        return _cut(", ".join(value_text(item, key=key, depth=depth + 1) for item in value)) or "—"
    if isinstance(value, dict):
        rows = _object_rows(value, labels={}, depth=depth + 1)
        return _cut("; ".join(f"{row['label']}: {row['value']}" for _, row in rows)) or "—"
    return _cut(str(value))


def call_currency(args: Any, context: Any = None) -> str | None:
    """The currency of a call's sums of money: its arguments' (``currency``), else the one its
    context writes an amount in ("4,800.00 USD"); ``None`` when neither says."""
    if isinstance(args, dict) and (own := _currency_of(args)):
        return own
    for item in context if isinstance(context, list) else []:
        value = str(item.get("value", "")) if isinstance(item, dict) else ""
        written = _WRITTEN_MONEY.fullmatch(value.strip())
        if written and is_money_key(str(item.get("label", ""))):
            return written[1]
    return None


_WRITTEN_MONEY = re.compile(r"-?[\d.,\s]+\s([A-Z]{3})")


def _currency_of(obj: dict[str, Any]) -> str | None:
    for key in CURRENCY_KEYS:
        if isinstance(obj.get(key), str) and obj[key].strip():
            return obj[key].strip()
    return None


def _object_rows(
    obj: dict[str, Any], *, labels: dict[str, str], depth: int = 0, currency: str | None = None
) -> list[tuple[str, dict[str, str]]]:
    """The keys of ``obj`` as ``(key, row)``; an amount takes the object's currency (else
    ``currency``, the one it has when none is given), which is then no row of its own."""
    currency = _currency_of(obj) or currency
    with_money = currency is not None and any(
        is_money_key(k) and _decimal(v) is not None for k, v in obj.items()
    )
    rows = []
    for key, value in obj.items():
        if with_money and key in CURRENCY_KEYS:
            continue
        if with_money and is_money_key(key) and _decimal(value) is not None:
            text = money_text(value, currency)
        else:
            text = value_text(value, key=key, depth=depth)
        rows.append((str(key), {"label": labels.get(key) or humanized_key(key), "value": text}))
    return rows


# --- labels from the parameter schema ------------------------------------------------------------


def parameter_labels(parameters: Any) -> dict[str, str]:
    """``{key: label}`` from a JSON schema's properties: their ``title``, else a description of
    at most :data:`MAX_LABEL_WORDS` words (a sentence is no label), else nothing."""
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    if not isinstance(properties, dict):
        return {}
    labels = {}
    for key, schema in properties.items():
        if not isinstance(schema, dict):
            continue
        title = schema.get("title")
        description = schema.get("description")
        if isinstance(title, str) and title.strip():
            labels[key] = title.strip()[:60]
        elif isinstance(description, str) and 0 < len(description.split()) <= MAX_LABEL_WORDS:
            labels[key] = description.strip().rstrip(".")[:60]
    return labels


def default_currency(parameters: Any) -> str | None:
    """The currency a call has when its arguments name none: the default its parameter schema
    gives its currency (``{"currency": {"default": "USD"}}``), else ``None``."""
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    for key in CURRENCY_KEYS:
        schema = properties.get(key) if isinstance(properties, dict) else None
        default = schema.get("default") if isinstance(schema, dict) else None
        if isinstance(default, str) and default.strip():
            return default.strip()
    return None


def argument_rows(
    args: Any, parameters: Any = None, *, order: list[str] | None = None
) -> list[dict[str, str]]:
    """The call's arguments as ``[{"label", "value", "argument"}]``: in ``order``, else those the
    parameter schema requires in its order, then ids, then the other keys alphabetically (stored
    JSON does not keep its keys' order); an amount takes the arguments' currency (which is then not a
    row of its own), or the schema's default currency when they name none."""
    if not isinstance(args, dict):
        return [{"label": "Arguments", "value": value_text(args)}]
    if order is None:
        # The schema's ``required`` list keeps its order wherever the schema is stored (the keys
        # of its ``properties`` do not, in PostgreSQL's jsonb): the essential arguments first.
        required = parameters.get("required") if isinstance(parameters, dict) else None
        order = [str(key) for key in required] if isinstance(required, list) else []
    rank = {key: i for i, key in enumerate(order)}

    def place(key: Any) -> tuple[int, bool, str]:
        # Unranked keys: what the call is on (an id) first, then alphabetically.
        name = str(key)
        return rank.get(key, len(rank)), not (name == "id" or name.lower().endswith(("_id", "id"))), name

    ordered = dict(sorted(args.items(), key=lambda item: place(item[0])))
    rows = _object_rows(ordered, labels=parameter_labels(parameters), currency=default_currency(parameters))
    return [{**row, "argument": key} for key, row in rows][:MAX_ITEMS]


# --- a context action's answer ------------------------------------------------------------------


_MISSING = object()


def _dig(obj: Any, path: str) -> Any:
    for part in str(path).split("."):
        if not isinstance(obj, dict) or part not in obj:
            return _MISSING
        obj = obj[part]
    return obj


def answer_rows(answer: Any, fields: list[Any]) -> list[dict[str, str]] | None:
    """The listed ``fields`` (keys, or dotted paths) of a context action's answer as rows, in
    order; an amount is written with its object's currency ("1,200.00 USD") and a currency field
    listed beside it is then left out. ``None`` when the answer holds none of them (the caller
    falls back to the arguments)."""
    if isinstance(answer, list) and len(answer) == 1:  # a search that found the one record
        answer = answer[0]
    if not isinstance(answer, dict):
        return None
    names = [str(f) for f in fields if isinstance(f, str) and f.strip()]
    rows = []
    for name in names:
        value = _dig(answer, name)
        if value is _MISSING:
            continue
        parent_path, _, key = name.rpartition(".")
        parent = _dig(answer, parent_path) if parent_path else answer
        currency = _currency_of(parent) if isinstance(parent, dict) else None
        if key in CURRENCY_KEYS and any(is_money_key(n.rpartition(".")[2]) for n in names):
            continue  # shown with the amount
        if currency is not None and is_money_key(key) and _decimal(value) is not None:
            text = money_text(value, currency)
        else:
            text = value_text(value, key=key)
        rows.append({"label": humanized_key(key), "value": text})
    return rows[:MAX_ITEMS] or None


# --- reading it when a request opens ------------------------------------------------------------


@dataclass(frozen=True)
class CallFacts:
    """What opening a request needs to describe a call (read from the database beforehand)."""

    title: str
    parameters: dict[str, Any] = field(default_factory=dict)
    #: the connector's read action to call for the context, built like any tool of the connector
    context_tool: Tool | None = None
    context_placeholders: tuple[str, ...] = ()
    context_fields: tuple[str, ...] = ()


def title_of(tool_name: str) -> str:
    """The title of a tool nobody named: its name made readable ("Purchase pay")."""
    return readable_tool_name(tool_name)


def call_facts(*, agent: Agent, tool_name: str) -> CallFacts:
    """The tool's title and parameters (from the agent's toolbox) and its context action, if its
    connector action declares one that can be read: a GET of the same HTTP connector, with fields
    to show. Synchronous (reads the database); never raises — a toolbox that cannot be built
    describes the call by its name."""
    try:
        tool = tools_for_agent(agent).get(tool_name)
    except Exception:  # the engine reports a broken toolbox; a description is no place to fail
        log.info("the tools of agent %s could not be read to describe %s", agent.pk, tool_name, exc_info=True)
        tool = None
    title = tool.spec.display if tool is not None else title_of(tool_name)
    parameters = dict(tool.spec.parameters) if tool is not None else {}
    slug, sep, name = tool_name.partition("__")
    action = None
    if sep:
        action = (
            agent.actions.filter(
                connector__organization_id=agent.organization_id,
                connector__archived_at__isnull=True,
                connector__kind=Connector.Kind.HTTP,
                connector__slug=slug,
                name=name,
            )
            .select_related("connector", "context_action")
            .first()
        )
    read = action.context_action if action is not None else None
    fields = tuple(str(f) for f in (action.context_fields or []) if isinstance(f, str)) if action else ()
    if (
        action is None
        or read is None
        or not fields
        or read.connector_id != action.connector_id
        or str(read.method).upper() != ConnectorAction.Method.GET
    ):
        return CallFacts(title=title, parameters=parameters)
    context_tool = HttpActionTool(action=read, connector=action.connector)
    context_tool.timeout = min(context_tool.timeout, CONTEXT_TIMEOUT_SECONDS)
    return CallFacts(
        title=title,
        parameters=parameters,
        context_tool=context_tool,
        context_placeholders=tuple(PLACEHOLDER_RE.findall(read.path_template or "")),
        context_fields=fields,
    )


async def context_read(facts: CallFacts, args: dict[str, Any]) -> list[dict[str, str]] | None:
    """The context action's fields for a call with ``args`` (run on the event loop: the action is
    an HTTP call, and the service may be this very server). ``None`` when there is no context
    action or on any failure, which is logged and otherwise ignored."""
    tool = facts.context_tool
    if tool is None:
        return None
    values = {
        name: args[name] for name in facts.context_placeholders if isinstance(args, dict) and name in args
    }
    try:
        async with asyncio.timeout(CONTEXT_TIMEOUT_SECONDS):
            answer = await tool.run(values)
    except Exception as exc:  # any failure: the arguments describe the call instead
        log.info("the context of a %s call could not be read: %s", facts.title, exc)
        return None
    return answer_rows(answer, list(facts.context_fields))


def context_of(
    facts: CallFacts, args: dict[str, Any], read: list[dict[str, str]] | None
) -> list[dict[str, str]]:
    """The context to store: what the context action answered, else the arguments."""
    return read if read else argument_rows(args, facts.parameters)


def moment_text(moment: Any, *, now: Any = None, full: bool = False) -> str:
    """A moment in the server's time zone, with the zone: "10:02 UTC" today, else
    "2026-11-30 10:02 UTC"; with ``full``, always "2026-11-30 10:02:07 UTC"."""
    if moment is None:
        return ""
    local = timezone.localtime(moment)
    if full:
        return dateformat.format(local, "Y-m-d H:i:s T")
    today = timezone.localtime(now or timezone.now()).date()
    return dateformat.format(local, "H:i T" if local.date() == today else "Y-m-d H:i T")
