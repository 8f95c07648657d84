"""The built-in tools (calculator, current time), and the toolbox that assembles an agent's tools
from its actions, database connectors and built-ins."""

from __future__ import annotations

from typing import Any

import pytest

from agents.models import Agent, Connector
from agents.tools.base import ToolError
from agents.tools.builtins import Calculator, CurrentTime
from agents.tools.http import HttpActionTool
from agents.tools.toolbox import ToolboxError, tools_for_agent
from tests.personas import Personas, make_action, make_agent, make_http_connector

# --- built-ins -----------------------------------------------------------------------------------------


async def test_the_calculator_evaluates_arithmetic() -> None:
    calculator = Calculator()
    assert (await calculator.run({"expression": "(1200 - 200) * 1.06"}))["value"] == pytest.approx(1060.0)
    assert (await calculator.run({"expression": "7 // 2 + 2 ** 10 - -1"}))["value"] == 1028


@pytest.mark.parametrize("expression", ["__import__('os')", "open('/etc/passwd')", "(1).__class__"])
async def test_the_calculator_refuses_anything_but_arithmetic(expression: str) -> None:
    with pytest.raises(ToolError, match="only numbers"):
        await Calculator().run({"expression": expression})


async def test_the_calculator_reports_division_by_zero() -> None:
    with pytest.raises(ToolError, match=r"^division by zero$"):
        await Calculator().run({"expression": "1 / (2 - 2)"})


async def test_current_time_answers_in_the_given_zone_and_refuses_an_unknown_one() -> None:
    shanghai = await CurrentTime().run({"timezone": "Asia/Shanghai"})
    assert shanghai["now"].endswith("+08:00")
    with pytest.raises(ToolError, match="unknown time zone 'Mars/Olympus_Mons'"):
        await CurrentTime().run({"timezone": "Mars/Olympus_Mons"})


# --- the toolbox ---------------------------------------------------------------------------------------


def agent_with_tools(personas: Personas, *, extra_actions: int = 0) -> Agent:
    oa = make_http_connector(personas.org, "http://oa.example.test/api/", secrets={"headers": {"X": "1"}})
    ledger = Connector.objects.create(
        organization=personas.org,
        slug="ledger",
        name="Ledger",
        kind=Connector.Kind.DATABASE,
        secrets={"dsn": "sqlite:///ledger.sqlite3"},
    )
    actions = [
        make_action(oa, "purchase_pay", method="POST", path="purchases/{purchase_id}/pay"),
        make_action(oa, "purchase_list", path="purchases"),
        make_action(ledger, "reporting"),  # any action of a database connector grants its two tools
        make_action(ledger, "reporting_too"),  # … once
    ]
    crm = make_http_connector(personas.org, "http://crm.example.test/", slug="crm")
    actions += [make_action(crm, f"lookup_{n}", path=f"lookup/{n}") for n in range(extra_actions)]
    return make_agent(
        personas.org, personas.operator, actions=actions, builtin_tools=["current_time", "calculator"]
    )


def test_the_toolbox_builds_the_agents_action_database_and_builtin_tools(personas: Personas) -> None:
    agent = agent_with_tools(personas)
    tools = tools_for_agent(Agent.objects.get(pk=agent.pk))
    assert list(tools) == [
        "ledger__sql_query",
        "ledger__sql_execute",
        "oa__purchase_list",
        "oa__purchase_pay",
        "current_time",
        "calculator",
    ]
    assert isinstance(tools["oa__purchase_pay"], HttpActionTool)
    assert tools["oa__purchase_pay"].spec.requires_confirmation is True
    assert isinstance(tools["current_time"], CurrentTime)
    assert all(name == tool.name for name, tool in tools.items())


@pytest.mark.parametrize("extra_actions", [0, 12])
def test_the_toolbox_costs_one_query_however_many_actions_the_agent_has(
    personas: Personas, django_assert_max_num_queries: Any, extra_actions: int
) -> None:
    agent = Agent.objects.get(pk=agent_with_tools(personas, extra_actions=extra_actions).pk)
    with django_assert_max_num_queries(1):
        tools = tools_for_agent(agent)
    assert len(tools) == 6 + extra_actions


def test_the_toolbox_ignores_actions_of_another_organisations_connectors(personas: Personas) -> None:
    foreign = make_http_connector(personas.other_org, "http://globex.example.test/", slug="globex")
    agent = make_agent(
        personas.org,
        personas.operator,
        actions=[make_action(foreign, "steal", path="secrets")],
        builtin_tools=[],
    )
    assert tools_for_agent(agent) == {}


def test_an_unknown_builtin_is_a_toolbox_error(personas: Personas) -> None:
    agent = make_agent(personas.org, personas.operator, builtin_tools=["calculator", "shell"])
    with pytest.raises(ToolboxError, match="unknown built-in tool 'shell'"):
        tools_for_agent(agent)
