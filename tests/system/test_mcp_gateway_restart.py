"""The MCP gateway under ``make prod``'s processes: the server a client waits on is killed while the
client's call waits for a person's approval. The call is not lost (the approval, given after the
restart, runs it in a worker) and does not run twice (the client, calling again once the server is
back, is answered from the same run)."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest
from rest_framework.authtoken.models import Token

from agents.models import ConnectorAction, Run, RunStatus
from approvals.models import ConfirmationRequest
from mcp_gateway.models import GatewayCall
from tests.agents.mcp_kit import calls_of, listed, stdio_connector
from tests.approvals.kit import set_policy
from tests.mcp_gateway.kit import Waiting, make_gateway, mcp_client, run_async, until
from tests.personas import make_agent, make_personas
from tests.system.kit import fleet

pytestmark = [pytest.mark.system, pytest.mark.postgres, pytest.mark.redis, pytest.mark.timeout(240)]


@pytest.mark.django_db(transaction=True)  # the processes read what the test commits
def test_a_call_waiting_for_approval_survives_its_server_and_runs_once(tmp_path: Path) -> None:
    personas = make_personas()
    log = tmp_path / "records.jsonl"
    records = stdio_connector(personas.org, log)
    listed(records)
    assert ConnectorAction.objects.get(remote_name="delete_record").requires_confirmation
    agent = make_agent(personas.org, personas.operator)
    agent.actions.set(records.actions.all())
    set_policy(personas)
    desk = make_gateway(agent)
    member = Token.objects.create(user=personas.member).key
    april = Token.objects.create(user=personas.approver).key

    with fleet(web=1, workers=1) as prod:
        url = prod.url(0, desk.path)
        first = Waiting(url, member, "records__delete_record", {"record_id": "r-2"})
        request = until(lambda: ConfirmationRequest.objects.first(), timeout=60)
        run = Run.objects.get(pk=request.run_id)
        until(lambda: Run.objects.get(pk=run.pk).status == RunStatus.AWAITING_APPROVAL, timeout=30)

        # The server the client waits on dies; the client's request with it.
        [web] = prod.webs
        web.signal(signal.SIGKILL)
        web.kill()
        with pytest.raises(BaseException):  # noqa: B017 - whatever the SDK raises for a dropped stream
            first.join(timeout=60)
        assert calls_of(log, "delete_record") == []

        web.start()
        prod.wait_ready()
        decided = httpx.post(
            prod.url(0, f"/api/approvals/{request.pk}/decision/"),
            json={"decision": "approve"},
            headers={"Authorization": f"Token {april}"},
            timeout=10,
        )
        assert decided.status_code == 200, decided.text
        # The verdict resumes the parked run in the worker: the tool runs there, once.
        until(lambda: Run.objects.get(pk=run.pk).status == RunStatus.COMPLETED, timeout=60)
        assert calls_of(log, "delete_record") == [{"record_id": "r-2"}], prod.log()

        # The client calls again once its server is back: the same run answers.
        async def again():
            async with mcp_client(url, member) as client:
                return await client.call_tool("records__delete_record", {"record_id": "r-2"})

        result = run_async(again())

    assert not result.is_error, result
    assert result.structured_content == {"result": "deleted r-2"}
    assert calls_of(log, "delete_record") == [{"record_id": "r-2"}], "run once, answered twice"
    assert GatewayCall.objects.count() == 1 and GatewayCall.objects.get().delivered_at is not None
    assert ConfirmationRequest.objects.count() == 1
