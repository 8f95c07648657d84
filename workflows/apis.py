"""The REST API of workflows (mounted under ``/api/``): define, start, follow, cancel.

Thin views: a nested serializer validates, a selector reads (another organisation's objects are
404), one service writes. Operators define workflows; any member starts one; a run's node states
are readable by its starter and the organisation's operators, admins and auditors.
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.apis import ERROR_RESPONSES, MAX_ID, MAX_INPUT_LENGTH, _not_found, api_error
from agents.scoped_apis import ScopedDetailApi, ScopedListApi, ScopedRunStartApi
from fimone.errors import ServiceError
from workflows import selectors, services
from workflows.models import NodeStatus, Workflow, WorkflowRun, WorkflowStatus


class WorkflowOutput(serializers.Serializer):
    id = serializers.IntegerField()
    organization = serializers.IntegerField(source="organization_id")
    name = serializers.CharField()
    description = serializers.CharField()
    graph = serializers.JSONField()
    hooks = serializers.JSONField()
    require_confirmation_for_all = serializers.BooleanField()
    connector_agent = serializers.IntegerField(source="connector_agent_id", allow_null=True)
    archived = serializers.SerializerMethodField()
    runs = serializers.SerializerMethodField()

    def get_archived(self, workflow: Workflow) -> bool:
        return workflow.archived_at is not None

    def get_runs(self, workflow: Workflow) -> str:
        return reverse("api-workflow-run-start", kwargs={"workflow_id": workflow.pk})


class WorkflowListApi(ScopedListApi, operations="workflows", tag="workflows"):
    """The workflows of the caller's organisations (GET); define one as an operator (POST)."""

    selector = staticmethod(selectors.workflow_list)

    @extend_schema_serializer(component_name="WorkflowCreate")
    class InputSerializer(serializers.Serializer):
        organization = serializers.IntegerField(min_value=1, max_value=MAX_ID)
        name = serializers.CharField(max_length=200)
        description = serializers.CharField(required=False, allow_blank=True, default="")
        graph = serializers.JSONField()
        hooks = serializers.JSONField(required=False, default=list)
        require_confirmation_for_all = serializers.BooleanField(required=False, default=False)
        connector_agent = serializers.IntegerField(
            required=False, allow_null=True, min_value=1, max_value=MAX_ID
        )

    OutputSerializer = extend_schema_serializer(component_name="Workflow")(WorkflowOutput)

    def create(self, *, user: Any, data: dict[str, Any]) -> Workflow:
        return services.workflow_create(
            user=user,
            organization_id=data["organization"],
            name=data["name"],
            description=data["description"],
            graph=data["graph"],
            hooks=data["hooks"],
            require_confirmation_for_all=data["require_confirmation_for_all"],
            connector_agent_id=data.get("connector_agent"),
        )


class WorkflowDetailApi(ScopedDetailApi, operations="workflows", tag="workflows"):
    """One workflow of the caller's organisations."""

    selector = staticmethod(selectors.workflow_get)
    OutputSerializer = WorkflowListApi.OutputSerializer


class WorkflowRunDetailApi(ScopedDetailApi, operations="workflow_runs", tag="workflows"):
    """A workflow run and its node states."""

    selector = staticmethod(selectors.workflow_run_get)

    @extend_schema_serializer(component_name="WorkflowRun")
    class OutputSerializer(serializers.Serializer):
        @extend_schema_serializer(component_name="WorkflowNodeState")
        class NodeSerializer(serializers.Serializer):
            node_id = serializers.CharField()
            kind = serializers.CharField()
            status = serializers.ChoiceField(choices=NodeStatus.choices)
            run = serializers.IntegerField(source="run_id", allow_null=True)
            input = serializers.CharField()
            output = serializers.CharField()
            error = serializers.CharField()
            started_at = serializers.DateTimeField(allow_null=True)
            finished_at = serializers.DateTimeField(allow_null=True)

        id = serializers.IntegerField()
        workflow = serializers.IntegerField(source="workflow_id")
        status = serializers.ChoiceField(choices=WorkflowStatus.choices)
        input = serializers.CharField()
        output = serializers.CharField()
        error = serializers.CharField()
        current_node = serializers.CharField()
        created_at = serializers.DateTimeField()
        finished_at = serializers.DateTimeField(allow_null=True)
        nodes = NodeSerializer(many=True, source="nodes.all")


class WorkflowRunStartApi(ScopedRunStartApi, operations="workflow_runs", tag="workflows"):
    """Start a workflow of the caller's organisations (counted with the caller's runs started)."""

    selector = staticmethod(selectors.workflow_get)

    @extend_schema_serializer(component_name="WorkflowRunStart")
    class InputSerializer(serializers.Serializer):
        input = serializers.CharField(
            max_length=MAX_INPUT_LENGTH, allow_blank=True, required=False, default=""
        )

    OutputSerializer = WorkflowRunDetailApi.OutputSerializer

    def start(self, selected: Workflow, *, user: Any, data: dict[str, Any]) -> WorkflowRun:
        return services.workflow_run_start(workflow=selected, user=user, input=data["input"])


class WorkflowRunCancelApi(APIView):
    """Cancel a workflow run in flight (its starter, or an operator of its organisation)."""

    OutputSerializer = WorkflowRunDetailApi.OutputSerializer

    @extend_schema(
        operation_id="workflow_runs_cancel",
        tags=["workflows"],
        request=None,
        responses={200: OutputSerializer, **ERROR_RESPONSES},
    )
    def post(self, request: Request, workflow_run_id: int) -> Response:
        workflow_run = selectors.workflow_run_get(workflow_run_id=workflow_run_id, user=request.user)
        if workflow_run is None:
            raise _not_found()
        try:
            workflow_run = services.workflow_run_cancel(workflow_run=workflow_run, user=request.user)
        except ServiceError as exc:
            raise api_error(exc) from None
        return Response(self.OutputSerializer(workflow_run).data)
