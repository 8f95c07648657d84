"""The REST API of evals (mounted under ``/api/``): eval sets, starting an eval run, its results.

Operators and admins create sets and start runs; auditors read them too. Another organisation's
objects answer 404.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from agents import selectors as agent_selectors
from agents.apis import MAX_ID, _not_found
from agents.scoped_apis import ScopedDetailApi, ScopedListApi, ScopedRunStartApi
from evals import selectors, services
from evals.models import Check, EvalRun, EvalSet, EvalStatus, Outcome


class EvalSetListApi(ScopedListApi, operations="eval_sets", tag="evals"):
    """The eval sets the caller may read (GET); create one as an operator (POST)."""

    selector = staticmethod(selectors.eval_set_list)

    @extend_schema_serializer(component_name="EvalSetCreate")
    class InputSerializer(serializers.Serializer):
        @extend_schema_serializer(component_name="EvalCaseInput")
        class CaseSerializer(serializers.Serializer):
            input = serializers.CharField(max_length=20_000)
            expectation = serializers.ChoiceField(choices=Check.choices, default=Check.CONTAINS)
            expected = serializers.CharField(allow_blank=True)

        organization = serializers.IntegerField(min_value=1, max_value=MAX_ID)
        name = serializers.CharField(max_length=200)
        description = serializers.CharField(required=False, allow_blank=True, default="")
        cases = CaseSerializer(many=True, allow_empty=False)
        live_tools = serializers.ListField(
            child=serializers.CharField(max_length=200),
            required=False,
            default=list,
            max_length=100,
            help_text="Read-only tools the cases call for real; every other tool is answered "
            "without being called.",
        )
        tool_answers = serializers.DictField(
            required=False,
            default=dict,
            help_text="What a tool answers instead of being called, by tool name.",
        )

    @extend_schema_serializer(component_name="EvalSet")
    class OutputSerializer(serializers.Serializer):
        @extend_schema_serializer(component_name="EvalCase")
        class CaseSerializer(serializers.Serializer):
            input = serializers.CharField()
            expectation = serializers.ChoiceField(choices=Check.choices)
            expected = serializers.CharField()

        id = serializers.IntegerField()
        organization = serializers.IntegerField(source="organization_id")
        name = serializers.CharField()
        description = serializers.CharField()
        live_tools = serializers.ListField(child=serializers.CharField())
        tool_answers = serializers.DictField()
        cases = CaseSerializer(many=True, source="cases.all")

    def create(self, *, user: Any, data: dict[str, Any]) -> EvalSet:
        return services.eval_set_create(
            user=user,
            organization_id=data["organization"],
            name=data["name"],
            description=data["description"],
            cases=[dict(case) for case in data["cases"]],
            live_tools=list(data["live_tools"]),
            tool_answers=dict(data["tool_answers"]),
        )


class EvalRunDetailApi(ScopedDetailApi, operations="eval_runs", tag="evals"):
    """An eval run: its pass rate once complete, and each case's output and verdict."""

    selector = staticmethod(selectors.eval_run_get)

    @extend_schema_serializer(component_name="EvalRun")
    class OutputSerializer(serializers.Serializer):
        @extend_schema_serializer(component_name="EvalResult")
        class ResultSerializer(serializers.Serializer):
            input = serializers.CharField()
            expectation = serializers.ChoiceField(choices=Check.choices)
            expected = serializers.CharField()
            outcome = serializers.ChoiceField(choices=Outcome.choices)
            output = serializers.CharField()
            detail = serializers.CharField()
            run = serializers.IntegerField(source="run_id")

        id = serializers.IntegerField()
        eval_set = serializers.IntegerField(source="eval_set_id")
        agent = serializers.IntegerField(source="agent_id")
        status = serializers.ChoiceField(choices=EvalStatus.choices)
        total = serializers.IntegerField()
        passed = serializers.IntegerField()
        pass_rate = serializers.FloatField(allow_null=True)
        hooks_bypassed = serializers.SerializerMethodField()
        created_at = serializers.DateTimeField()
        finished_at = serializers.DateTimeField(allow_null=True)
        results = ResultSerializer(many=True, source="results.all")

        def get_hooks_bypassed(self, eval_run: EvalRun) -> bool:
            return True  # every eval run does, and says so


class EvalRunStartApi(ScopedRunStartApi, operations="eval_runs", tag="evals"):
    """Run an eval set on an agent of the same organisation (operators and admins; counted with
    the caller's runs started)."""

    selector = staticmethod(selectors.eval_set_get)

    @extend_schema_serializer(component_name="EvalRunStart")
    class InputSerializer(serializers.Serializer):
        agent = serializers.IntegerField(min_value=1, max_value=MAX_ID)

    OutputSerializer = EvalRunDetailApi.OutputSerializer

    def start(self, selected: EvalSet, *, user: Any, data: dict[str, Any]) -> EvalRun:
        agent = agent_selectors.agent_get(agent_id=data["agent"], user=user)
        if agent is None:
            raise _not_found("agent", "no such agent")
        return services.eval_run_start(eval_set=selected, agent=agent, user=user)
