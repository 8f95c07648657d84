"""The ``audit_log`` hook: one append-only ConnectorCallLog row per tool call, blocked ones included,
with secrets masked, and an admin that only reads it, one organisation at a time."""

from __future__ import annotations

import hashlib
import io
import json
import threading
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import close_old_connections
from django.db.models import ProtectedError

from agents.audit import connector_call_log_record, redacted_arguments
from agents.models import ConnectorCallLog, ToolExecution
from agents.services import run_start
from agents.tools.base import ToolError
from approvals.models import ConfirmationRequest
from approvals.services import confirmation_decide
from tests.admin_kit import grant, logged_in, page_text, url
from tests.agents.engine_kit import Harness, RecordingTool
from tests.approvals.audit_kit import behind_the_triggers
from tests.approvals.kit import pay_tool, paying_agent, set_policy
from tests.personas import make_agent, scripted

Outcome = ConnectorCallLog.Outcome
SECRET = "sk-live-Zk8s2mQ"
ARGS = {
    "purchase_id": "PO-1001",
    "api_key": SECRET,
    "callback": "https://bot:hunter2pass@hooks.example.test/paid",
    "note": "dsn postgres://app:s3cretpw@db/shop",
    "nested": [{"Authorization": "Bearer abc.def"}],
}
ANY_OBJECT = {"type": "object"}

pytestmark = pytest.mark.django_db(transaction=True)


def call(tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": args}]}


def agent_with(personas: Any, *turns: dict[str, Any], hooks: list[Any], **fields: Any) -> Any:
    config = scripted(*turns, {"content": "Outcome: {last}"}, hooks=hooks)
    return make_agent(personas.org, personas.operator, model_config_json=config, **fields)


def run_with(personas: Any, harness: Harness, agent: Any) -> Any:
    run = run_start(agent=agent, user=personas.member, input="go")
    harness.execute(run)
    return run


def test_it_records_a_successful_call_with_masked_arguments_and_the_full_results_digest(
    personas, resumes
) -> None:
    rows = {"rows": [{"id": i, "memo": "m" * 100} for i in range(200)]}
    tool = RecordingTool("oa__purchases_list", result=rows, parameters=ANY_OBJECT)
    agent = agent_with(
        personas,
        call("oa__purchases_list", ARGS),
        hooks=["audit_log", {"name": "result_truncate", "params": {"max_chars": 1000}}],
    )

    run = run_with(personas, Harness(tool), agent)

    [log] = ConnectorCallLog.objects.all()
    execution = ToolExecution.objects.get(run=run)
    assert (log.organization, log.agent, log.user, log.run) == (personas.org, agent, personas.member, run)
    assert (log.tool_call_id, log.tool_name, log.connector_slug) == (
        execution.tool_call_id,
        "oa__purchases_list",
        "oa",
    )
    assert log.outcome == Outcome.SUCCEEDED and log.blocked_by == "" and log.error == ""
    assert log.duration_ms is not None and 0 <= log.duration_ms < 5_000
    # The digest is of the tool's whole result, not of the truncated observation.
    full = json.dumps(execution.result, ensure_ascii=False, allow_nan=False).encode()
    assert (log.result_size, log.result_sha256) == (len(full), hashlib.sha256(full).hexdigest())
    assert tool.calls == [ARGS], "the tool itself got the real arguments"
    stored = json.dumps(log.arguments)
    for secret in (SECRET, "hunter2pass", "s3cretpw", "abc.def"):
        assert secret not in stored
    assert log.arguments["purchase_id"] == "PO-1001" and log.arguments["api_key"] == "***"


def test_it_records_a_failed_call_with_its_error_and_no_credential(personas, resumes) -> None:
    def fails(args: dict[str, Any]) -> Any:
        raise ToolError("upstream refused: postgres://app:s3cretpw@db/shop is down")

    tool = RecordingTool("ledger__sql_query", result=fails, parameters=ANY_OBJECT)
    agent = agent_with(personas, call("ledger__sql_query", {"sql": "SELECT 1"}), hooks=["audit_log"])

    run_with(personas, Harness(tool), agent)

    [log] = ConnectorCallLog.objects.all()
    assert log.outcome == Outcome.FAILED and "upstream refused" in log.error
    assert "s3cretpw" not in log.error and log.result_sha256


def test_it_records_a_call_blocked_by_a_declared_hook_and_names_the_hook(personas, resumes) -> None:
    tool = RecordingTool("oa__purchase_pay", parameters=ANY_OBJECT)
    deny = {"name": "deny_tools", "params": {"tools": "oa__purchase_*", "message": "Payments are frozen."}}
    agent = agent_with(personas, call("oa__purchase_pay", {"api_key": SECRET}), hooks=["audit_log", deny])

    run = run_with(personas, Harness(tool), agent)

    [log] = ConnectorCallLog.objects.all()
    assert (log.outcome, log.blocked_by, log.error) == (Outcome.BLOCKED, "deny_tools", "Payments are frozen.")
    assert log.run == run and log.duration_ms is None and log.result_size is None
    assert log.arguments == {"api_key": "***"} and tool.calls == []


def test_an_enforced_audit_log_with_a_matcher_records_a_blocked_call_and_the_agents_rewrite_is_not_hashed(
    personas, resumes
) -> None:
    """The organisation enforces ``audit_log`` for ``oa__*`` tools: it records a call the agent's
    own hook blocked (an observer behind a matcher), and, for a call that ran, digests the tool's
    own result although the agent's hooks ran before the enforced ones and rewrote it."""
    from tests.personas import make_hook

    make_hook(personas.org, "audit_log", matcher="oa__*")
    deny = {"name": "deny_tools", "params": {"tools": "oa__purchase_pay", "message": "Payments are frozen."}}
    redact = {"name": "redact_result", "params": {"patterns": ["secret-\\d+"]}}
    tools = [RecordingTool("oa__purchase_pay", parameters=ANY_OBJECT),
             RecordingTool("oa__purchase_list", parameters=ANY_OBJECT, result="secret-42")]  # fmt: skip
    agent = agent_with(
        personas,
        call("oa__purchase_pay", {"purchase_id": "PO-1"}),
        call("oa__purchase_list", {}),
        hooks=[deny, redact],
    )

    run_with(personas, Harness(*tools), agent)

    blocked, listed = ConnectorCallLog.objects.order_by("pk")
    assert (blocked.outcome, blocked.blocked_by) == (Outcome.BLOCKED, "deny_tools")
    assert listed.outcome == Outcome.SUCCEEDED
    assert listed.result_sha256 == hashlib.sha256(b"secret-42").hexdigest(), "the tool's own result"


def test_it_records_a_write_blocked_by_the_read_only_guard(personas, resumes) -> None:
    personas.org.read_only = True
    personas.org.save(update_fields=["read_only"])
    tool = RecordingTool("oa__purchase_pay", parameters=ANY_OBJECT, is_write=True)
    agent = agent_with(personas, call("oa__purchase_pay", {"purchase_id": "PO-1"}), hooks=["audit_log"])

    run_with(personas, Harness(tool), agent)

    [log] = ConnectorCallLog.objects.all()
    assert (log.outcome, log.blocked_by) == (Outcome.BLOCKED, "read_only_guard")
    assert log.error == "Org is in read-only mode — write blocked."


def test_it_records_a_call_a_human_rejected_as_blocked_by_the_gate(personas, resumes) -> None:
    set_policy(personas)
    harness = Harness(pay_tool())
    run = run_start(agent=paying_agent(personas, hooks=["audit_log"]), user=personas.member, input="pay")
    assert harness.execute(run) == "awaiting_approval"
    assert not ConnectorCallLog.objects.exists(), "a call waiting for a human is not an outcome yet"

    request = ConfirmationRequest.objects.get(run=run)
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=False, reason="too much")
    harness.resume(run)

    [log] = ConnectorCallLog.objects.all()
    assert (log.outcome, log.blocked_by) == (Outcome.BLOCKED, "confirmation_gate")
    assert "too much" in log.error


def test_it_records_only_the_tools_it_is_declared_for(personas, resumes) -> None:
    tools = [RecordingTool(n, parameters=ANY_OBJECT) for n in ("oa__purchases_list", "calculator")]
    agent = agent_with(
        personas,
        {
            "tool_calls": [
                {"name": "oa__purchases_list", "arguments": {}},
                {"name": "calculator", "arguments": {}},
            ]
        },
        hooks=[{"name": "audit_log", "params": {"tools": ["oa__*"]}}],
    )

    run_with(personas, Harness(*tools), agent)

    assert list(ConnectorCallLog.objects.values_list("tool_name", flat=True)) == ["oa__purchases_list"]


# --- append-only, protected history ---------------------------------------------------------------


def one_row(personas: Any, **fields: Any) -> ConnectorCallLog:
    fields.setdefault("user_id", personas.approver.pk)
    fields.setdefault("org_id", personas.org.pk)
    connector_call_log_record(
        agent_id=None,
        run_id=None,
        tool_call_id="call-1",
        tool_name="oa__purchases_list",
        arguments={"q": 1},
        outcome=Outcome.SUCCEEDED,
        result={"ok": True},
        has_result=True,
        **fields,
    )
    return ConnectorCallLog.objects.latest("pk")


def test_it_refuses_to_change_or_delete_a_logged_call(personas) -> None:
    log = one_row(personas)

    log.outcome = Outcome.BLOCKED
    with pytest.raises(PermissionError):
        log.save()
    with pytest.raises(PermissionError):
        log.delete()
    with pytest.raises(PermissionError):
        ConnectorCallLog.objects.filter(pk=log.pk).update(outcome=Outcome.BLOCKED)
    with pytest.raises(PermissionError):
        ConnectorCallLog.objects.all().delete()
    assert ConnectorCallLog.objects.get(pk=log.pk).outcome == Outcome.SUCCEEDED


def test_it_refuses_to_delete_a_user_or_organisation_whose_calls_are_logged(personas) -> None:
    one_row(personas)

    with pytest.raises(ProtectedError):
        personas.approver.delete()
    assert ConnectorCallLog.objects.count() == 1


def test_a_replayed_record_of_the_same_call_adds_nothing(personas, resumes) -> None:
    tool = RecordingTool("oa__purchases_list", parameters=ANY_OBJECT)
    run = run_with(
        personas, Harness(tool), agent_with(personas, call("oa__purchases_list", {}), hooks=["audit_log"])
    )
    [log] = ConnectorCallLog.objects.all()

    connector_call_log_record(
        org_id=personas.org.pk,
        agent_id=run.agent_id,
        user_id=run.user_id,
        run_id=run.pk,
        tool_call_id=log.tool_call_id,
        tool_name=log.tool_name,
        arguments={},
        outcome=Outcome.SUCCEEDED,
    )

    assert ConnectorCallLog.objects.count() == 1


def audit_verify(*args: str) -> tuple[bool, str]:
    out = io.StringIO()
    try:
        call_command("audit_verify", *args, stdout=out)
    except CommandError as exc:
        return False, out.getvalue() + str(exc)
    return True, out.getvalue()


def test_each_logged_call_is_a_link_of_its_organisations_chain_and_an_edit_is_found(personas) -> None:
    rows = [one_row(personas, duration_ms=d) for d in (12.5, 3.0, None)]
    one_row(personas, org_id=personas.other_org.pk, user_id=personas.stranger.pk)
    assert [r.chain_seq for r in rows] == [1, 2, 3]
    assert rows[1].prev_hash == rows[0].entry_hash and rows[2].prev_hash == rows[1].entry_hash
    ok, out = audit_verify()
    assert ok, out
    assert f"agents.connectorcalllog of organisation {personas.org.pk} (Acme): 3 links" in out

    with behind_the_triggers() as cursor:  # the database's owner hides what the agent really sent
        cursor.execute(
            f"UPDATE {ConnectorCallLog._meta.db_table} SET arguments = %s WHERE id = %s",  # noqa: S608
            [json.dumps({"q": 2}), rows[1].pk],
        )

    ok, out = audit_verify()
    assert not ok
    where = f"agents.connectorcalllog of organisation {personas.org.pk} (Acme)"
    assert f"BROKEN  {where}: first broken link #2 (row {rows[1].pk})" in out
    assert f"ok      agents.connectorcalllog of organisation {personas.other_org.pk}" in out


@pytest.mark.postgres
def test_concurrent_records_of_one_call_leave_one_row_and_an_unbroken_chain(personas, resumes) -> None:
    tool = RecordingTool("oa__purchases_list", parameters=ANY_OBJECT)
    run = run_with(
        personas, Harness(tool), agent_with(personas, call("oa__purchases_list", {}), hooks=["audit_log"])
    )
    [log] = ConnectorCallLog.objects.all()
    start, errors = threading.Barrier(4), []

    def record(n: int) -> None:
        try:
            start.wait()
            connector_call_log_record(
                org_id=personas.org.pk,
                agent_id=run.agent_id,
                user_id=run.user_id,
                run_id=run.pk if n % 2 else None,  # half replay the call, half are other calls
                tool_call_id=log.tool_call_id,
                tool_name=log.tool_name,
                arguments={"n": n},
                outcome=Outcome.SUCCEEDED,
            )
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(repr(exc))
        finally:
            close_old_connections()

    threads = [threading.Thread(target=record, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert errors == []
    assert ConnectorCallLog.objects.filter(run=run).count() == 1
    assert sorted(ConnectorCallLog.objects.values_list("chain_seq", flat=True)) == [1, 2, 3]
    ok, out = audit_verify()
    assert ok, out


def test_it_masks_secrets_however_deep_and_however_spelt() -> None:
    masked = redacted_arguments(
        {
            "Password": "p",
            "client_secret": "s",
            "X-Api-Key": "k",
            "author": "Ada",  # not a secret
            "deep": [[{"token": "t"}]],
            "url": "https://u:pw123@x.example/",
        }
    )

    assert masked == {
        "Password": "***",
        "client_secret": "***",
        "X-Api-Key": "***",
        "author": "Ada",
        "deep": [[{"token": "***"}]],
        "url": "https://u:***@x.example/",
    }


# --- the admin ------------------------------------------------------------------------------------


def test_the_admin_shows_the_log_read_only_and_only_the_users_organisations(personas, superuser) -> None:
    mine = one_row(personas)
    connector_call_log_record(
        org_id=personas.other_org.pk,
        agent_id=None,
        user_id=personas.stranger.pk,
        run_id=None,
        tool_call_id="call-globex",
        tool_name="globex__secret_plans",
        arguments={},
        outcome=Outcome.SUCCEEDED,
    )
    theirs = ConnectorCallLog.objects.get(tool_call_id="call-globex")
    personas.auditor.is_staff = True
    personas.auditor.save()
    for user in (personas.operator, personas.auditor):
        grant(
            user,
            "view_connectorcalllog",
            "change_connectorcalllog",
            "delete_connectorcalllog",
            app_label="agents",
        )
        client = logged_in(user)

        listing = client.get(url(ConnectorCallLog, "changelist")).context["cl"]
        assert list(listing.result_list) == [mine], user.username
        assert client.get(url(ConnectorCallLog, "change", theirs.pk)).status_code == 302
        page = client.get(url(ConnectorCallLog, "change", mine.pk))
        assert page.status_code == 200 and 'name="_save"' not in page_text(page)
        assert (
            client.post(url(ConnectorCallLog, "change", mine.pk), {"outcome": "blocked"}).status_code == 403
        )
        assert client.post(url(ConnectorCallLog, "delete", mine.pk), {"post": "yes"}).status_code == 403
        assert client.get(url(ConnectorCallLog, "add")).status_code == 403
    # a member without a managing or auditing role sees nothing
    personas.member.is_staff = True
    personas.member.save()
    grant(personas.member, "view_connectorcalllog", app_label="agents")
    assert logged_in(personas.member).get(url(ConnectorCallLog, "changelist")).context["cl"].result_count == 0
    assert logged_in(superuser).get(url(ConnectorCallLog, "changelist")).context["cl"].result_count == 2
    assert ConnectorCallLog.objects.get(pk=mine.pk).outcome == Outcome.SUCCEEDED
