"""The REST API of evals (mounted under ``/api/``): eval sets, starting an eval run, its results.

Operators and admins create sets and start runs; auditors read them too. Another organisation's
objects answer 404.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import selectors as agent_selectors
from agents.apis import ERROR_RESPONSES, MAX_ID, RunStartThrottle, _not_found, api_error
from agents.services import ServiceError
from evals import selectors, services
from evals.models import Check, EvalRun, EvalStatus, Outcome


class EvalSetListApi(APIView):
    """The eval sets the caller may read (GET); create one as an operator (POST)."""

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
        cases = CaseSerializer(many=True, source="cases.all")

    @extend_schema(
        operation_id="eval_sets_list", tags=["evals"], responses={200: OutputSerializer(many=True)}
    )
    def get(self, request: Request) -> Response:
        return Response(self.OutputSerializer(selectors.eval_set_list(user=request.user), many=True).data)

    @extend_schema(
        operation_id="eval_sets_create",
        tags=["evals"],
        request=InputSerializer,
        responses={201: OutputSerializer, **ERROR_RESPONSES},
    )
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            eval_set = services.eval_set_create(
                user=request.user,
                organization_id=data["organization"],
                name=data["name"],
                description=data["description"],
                cases=[dict(case) for case in data["cases"]],
            )
        except ServiceError as exc:
            raise api_error(exc) from None
        return Response(self.OutputSerializer(eval_set).data, status=status.HTTP_201_CREATED)


class EvalRunDetailApi(APIView):
    """An eval run: its pass rate once complete, and each case's output and verdict."""

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

    @extend_schema(
        operation_id="eval_runs_retrieve",
        tags=["evals"],
        responses={200: OutputSerializer, 404: ERROR_RESPONSES[404]},
    )
    def get(self, request: Request, eval_run_id: int) -> Response:
        eval_run = selectors.eval_run_get(eval_run_id=eval_run_id, user=request.user)
        if eval_run is None:
            raise _not_found()
        return Response(self.OutputSerializer(eval_run).data)


class EvalRunStartApi(APIView):
    """Run an eval set on an agent of the same organisation (operators and admins; counted with
    the caller's runs started)."""

    throttle_classes = [RunStartThrottle]

    @extend_schema_serializer(component_name="EvalRunStart")
    class InputSerializer(serializers.Serializer):
        agent = serializers.IntegerField(min_value=1, max_value=MAX_ID)

    OutputSerializer = EvalRunDetailApi.OutputSerializer

    @extend_schema(
        operation_id="eval_runs_start",
        tags=["evals"],
        request=InputSerializer,
        responses={201: OutputSerializer, **ERROR_RESPONSES},
    )
    def post(self, request: Request, eval_set_id: int) -> Response:
        eval_set = selectors.eval_set_get(eval_set_id=eval_set_id, user=request.user)
        if eval_set is None:
            raise _not_found()
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        agent = agent_selectors.agent_get(agent_id=serializer.validated_data["agent"], user=request.user)
        if agent is None:
            raise _not_found("agent", "no such agent")
        try:
            eval_run = services.eval_run_start(eval_set=eval_set, agent=agent, user=request.user)
        except ServiceError as exc:
            raise api_error(exc) from None
        eval_run = EvalRun.objects.get(pk=eval_run.pk)
        return Response(self.OutputSerializer(eval_run).data, status=status.HTTP_201_CREATED)
