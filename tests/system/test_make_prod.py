"""``make prod`` brings up the production topology for real: two Daphne servers, a Celery worker,
beat and the outbox relay on PostgreSQL + Redis, which serve the portal and carry a run from start
to finish."""

from __future__ import annotations

import time

import httpx
import pytest
from rest_framework.authtoken.models import Token

from tests.personas import make_agent, make_personas, scripted
from tests.system.kit import ROOT, make_prod

pytestmark = [pytest.mark.system, pytest.mark.postgres, pytest.mark.redis, pytest.mark.timeout(120)]


@pytest.mark.django_db(transaction=True)  # the processes read what the test commits
def test_make_prod_serves_the_portal_and_its_scripts_on_every_server_and_a_worker_completes_a_run() -> None:
    personas = make_personas()
    agent = make_agent(
        personas.org,
        personas.operator,
        builtin_tools=["calculator"],
        model_config_json=scripted(
            {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6 * 7"}}]},
            {"content": "The answer is {last}"},
        ),
    )
    token = Token.objects.create(user=personas.member)
    auth = {"Authorization": f"Token {token.key}"}

    with make_prod(web=2, workers=1) as prod:
        for index in range(2):
            assert httpx.get(prod.url(index, "/healthz")).status_code == 200
            ready = httpx.get(prod.url(index, "/readyz")).json()
            assert ready["checks"] == {"database": "ok", "redis": "ok", "migrations": "ok"}
            login = httpx.get(prod.url(index, "/approvals/login/"))
            assert login.status_code == 200, prod.log()
            assert "csrfmiddlewaretoken" in login.text
            # The pages' scripts and styles, gathered by collectstatic, come from the same servers.
            script = httpx.get(prod.url(index, "/static/portal/chat.js"))
            assert script.status_code == 200, prod.log()
            assert script.headers["content-type"].startswith("text/javascript")
            assert script.content == (ROOT / "portal/static/portal/chat.js").read_bytes()
            # chat.js is a module: the modules it imports ("./turn.js") are gathered and served beside it.
            module = httpx.get(prod.url(index, "/static/portal/turn.js"))
            assert module.status_code == 200, prod.log()
            assert module.headers["content-type"].startswith("text/javascript")
            assert httpx.get(prod.url(index, "/static/portal/portal.css")).status_code == 200
            assert httpx.get(prod.url(index, "/static/portal/missing.js")).status_code == 404

        # Started through one server, followed through the other: a worker runs it.
        started = httpx.post(
            prod.url(0, f"/api/agents/{agent.pk}/runs/"), json={"input": "what is 6 * 7?"}, headers=auth
        )
        assert started.status_code == 201, started.text
        run_id = started.json()["id"]
        deadline = time.monotonic() + 60
        while True:
            detail = httpx.get(prod.url(1, f"/api/runs/{run_id}/"), headers=auth).json()
            if detail["status"] in ("completed", "failed", "cancelled") or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert detail["status"] == "completed", f"{detail}\n{prod.log()}"
        assert detail["output"] == 'The answer is {"expression": "6 * 7", "value": 42}'

        # The outbox relay runs beside them, listening for verdicts' follow-ups.
        deadline = time.monotonic() + 20
        while "outbox relay listening" not in prod.log_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.3)
        assert "outbox relay listening" in prod.log_path.read_text(), prod.log()
