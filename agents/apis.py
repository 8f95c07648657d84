"""The REST API of agents and runs (mounted under ``/api/``; schema at ``/api/schema/``).

Thin views (HackSoft style): each validates its input with a nested serializer, reads through
``agents.selectors`` and writes through one ``agents.services`` call. Objects the caller may not
see are reported as 404, never 403, so ids of other organisations' objects reveal nothing.
A :class:`~fimone.errors.ServiceError` maps to an HTTP status by its ``code`` (:func:`api_error`).
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_serializer,
)
from rest_framework import serializers, status
from rest_framework.exceptions import APIException, NotFound, PermissionDenied, Throttled, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import selectors, services
from agents.models import Agent, ExecutionPath, Run, RunStatus
from agents.services import RunStartThrottle
from fimone.errors import ServiceError

MAX_INPUT_LENGTH = 20_000
DEFAULT_EVENT_LIMIT = 100
MAX_EVENT_LIMIT = 500
MAX_ID = 2**63 - 1


class Conflict(APIException):
    """409: the request conflicts with the object's current state."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state of the resource."
    default_code = "conflict"


class InvalidRequest(APIException):
    """400 with ``{"detail": …}``: a refusal that names no single field."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_detail = "Invalid request."
    default_code = "invalid"


def api_error(exc: ServiceError) -> APIException:
    """The API exception for a service refusal: ``invalid`` → 400, ``forbidden`` → 403,
    ``not_found`` → 404, ``conflict`` → 409; the body is ``{field: [message]}`` when the refusal
    names a field, else ``{"detail": message}``."""
    detail: Any = {exc.field: [exc.message]} if exc.field else exc.message
    if exc.code == "not_found":
        return NotFound(detail)
    if exc.code == "conflict":
        return Conflict(detail)
    if exc.code == "forbidden":
        return PermissionDenied(detail)
    if exc.code == "throttled":
        return Throttled(wait=exc.retry_after, detail=exc.message)
    if exc.field:
        return ValidationError(detail)
    return InvalidRequest(detail)


def _not_found(field: str | None = None, message: str = "Not found.") -> NotFound:
    return NotFound({field: [message]} if field else message)


ERROR_RESPONSES: dict[int, OpenApiResponse] = {
    400: OpenApiResponse(description='Invalid input: `{field: [message]}` or `{"detail": message}`.'),
    404: OpenApiResponse(description="No such object visible to the caller."),
}


class AgentListApi(APIView):
    """The agents of the caller's organisations that can run (archived ones are left out)."""

    @extend_schema_serializer(component_name="Agent")
    class OutputSerializer(serializers.Serializer):
        @extend_schema_serializer(component_name="AgentLinks")
        class LinksSerializer(serializers.Serializer):
            runs = serializers.CharField(help_text="POST here to start a run.")

        id = serializers.IntegerField()
        name = serializers.CharField()
        organization = serializers.IntegerField(source="organization_id")
        organization_name = serializers.CharField(source="organization.name")
        engine = serializers.ChoiceField(choices=Agent.Engine.choices)
        created_at = serializers.DateTimeField()
        links = serializers.SerializerMethodField()

        @extend_schema_field(LinksSerializer)
        def get_links(self, agent: Agent) -> dict[str, str]:
            return {"runs": reverse("api-run-start", kwargs={"agent_id": agent.pk})}

    @extend_schema(operation_id="agents_list", tags=["agents"], responses={200: OutputSerializer(many=True)})
    def get(self, request: Request) -> Response:
        agents = selectors.agent_list(user=request.user)
        return Response(self.OutputSerializer(agents, many=True).data)


class RunDetailApi(APIView):
    """One of the caller's own runs."""

    @extend_schema_serializer(component_name="Run")
    class OutputSerializer(serializers.Serializer):
        @extend_schema_serializer(component_name="RunLinks")
        class LinksSerializer(serializers.Serializer):
            self = serializers.CharField()
            events = serializers.CharField(help_text="The run's events, paged with ?after=<seq>&limit=<n>.")
            cancel = serializers.CharField(help_text="POST here to cancel the run.")

        id = serializers.IntegerField()
        status = serializers.ChoiceField(choices=RunStatus.choices)
        conversation = serializers.IntegerField(source="conversation_id")
        agent = serializers.IntegerField(source="agent_id")
        execution_path = serializers.ChoiceField(choices=ExecutionPath.choices)
        input = serializers.CharField()
        output = serializers.CharField()
        error = serializers.CharField()
        created_at = serializers.DateTimeField()
        started_at = serializers.DateTimeField(allow_null=True)
        finished_at = serializers.DateTimeField(allow_null=True)
        links = serializers.SerializerMethodField()

        @extend_schema_field(LinksSerializer)
        def get_links(self, run: Run) -> dict[str, str]:
            kwargs = {"run_id": run.pk}
            return {
                "self": reverse("api-run-detail", kwargs=kwargs),
                "events": reverse("api-run-events", kwargs=kwargs),
                "cancel": reverse("api-run-cancel", kwargs=kwargs),
            }

    @extend_schema(
        operation_id="runs_retrieve",
        tags=["runs"],
        responses={200: OutputSerializer, 404: ERROR_RESPONSES[404]},
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = selectors.run_get(run_id=run_id, user=request.user)
        if run is None:
            raise _not_found()
        return Response(self.OutputSerializer(run).data)


class RunStartApi(APIView):
    """Start a run of an agent of the caller's organisations (a new conversation unless one of the
    caller's conversations with this agent is given)."""

    throttle_classes = [RunStartThrottle]

    @extend_schema_serializer(component_name="RunStart")
    class InputSerializer(serializers.Serializer):
        input = serializers.CharField(max_length=MAX_INPUT_LENGTH, help_text="The user's message.")
        conversation = serializers.IntegerField(
            required=False,
            allow_null=True,
            min_value=1,
            max_value=MAX_ID,
            help_text="Continue this conversation of the caller's with the agent; omit to start one.",
        )

    OutputSerializer = RunDetailApi.OutputSerializer

    @extend_schema(
        operation_id="runs_start",
        tags=["runs"],
        request=InputSerializer,
        responses={
            201: OutputSerializer,
            **ERROR_RESPONSES,
            409: OpenApiResponse(
                description="The agent (or its organisation) is archived, or the conversation already "
                "has a run in progress."
            ),
            429: OpenApiResponse(description="Too many runs started: `detail` says so; see `Retry-After`."),
        },
    )
    def post(self, request: Request, agent_id: int) -> Response:
        agent = selectors.agent_get(agent_id=agent_id, user=request.user)
        if agent is None:
            raise _not_found()
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        conversation = None
        if data.get("conversation") is not None:
            conversation = selectors.conversation_get(conversation_id=data["conversation"], user=request.user)
            if conversation is None:
                raise _not_found("conversation", "no such conversation with this agent")
        try:
            run = services.run_start(
                agent=agent,
                user=request.user,
                input=data["input"],
                conversation=conversation,
                execution_path=ExecutionPath.API,
            )
        except ServiceError as exc:
            raise api_error(exc) from exc
        return Response(self.OutputSerializer(run).data, status=status.HTTP_201_CREATED)


class RunEventListApi(APIView):
    """A page of one of the caller's runs' events, in ``seq`` order. Poll with ``after`` set to the
    previous page's ``next_after`` to follow a run without a WebSocket."""

    class FilterSerializer(serializers.Serializer):
        after = serializers.IntegerField(
            required=False,
            default=0,
            min_value=0,
            max_value=MAX_ID,
            help_text="Return events with seq > after.",
        )
        limit = serializers.IntegerField(
            required=False,
            default=DEFAULT_EVENT_LIMIT,
            min_value=1,
            max_value=MAX_EVENT_LIMIT,
            help_text=f"At most this many events (default {DEFAULT_EVENT_LIMIT}, max {MAX_EVENT_LIMIT}).",
        )

    @extend_schema_serializer(component_name="RunEventPage")
    class OutputSerializer(serializers.Serializer):
        @extend_schema_serializer(component_name="RunEvent")
        class EventSerializer(serializers.Serializer):
            run_id = serializers.IntegerField()
            seq = serializers.IntegerField()
            type = serializers.CharField(help_text="One of the types documented in agents.events.")
            payload = serializers.JSONField()
            created_at = serializers.DateTimeField()

        events = EventSerializer(many=True, help_text="RunEvent.as_message() of each event, by seq.")
        next_after = serializers.IntegerField(help_text="Pass as `after` to get the next page.")
        run_status = serializers.CharField(help_text="The run's current status (the values of Run.status).")
        has_more = serializers.BooleanField(help_text="Whether more events follow this page.")

    @extend_schema(
        operation_id="runs_events_list",
        tags=["runs"],
        parameters=[FilterSerializer],
        responses={200: OutputSerializer, **ERROR_RESPONSES},
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = selectors.run_get(run_id=run_id, user=request.user)
        if run is None:
            raise _not_found()
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        page = selectors.run_event_page(run=run, **filters.validated_data)
        data = {
            "events": [event.as_message() for event in page.events],
            "next_after": page.next_after,
            "run_status": run.status,
            "has_more": page.has_more,
        }
        return Response(self.OutputSerializer(data).data)


class RunCancelApi(APIView):
    """Cancel one of the caller's runs: a queued or suspended run stops at once, a running one at
    its next step."""

    OutputSerializer = RunDetailApi.OutputSerializer

    @extend_schema(
        operation_id="runs_cancel",
        tags=["runs"],
        request=None,
        responses={
            200: OutputSerializer,
            404: ERROR_RESPONSES[404],
            409: OpenApiResponse(description="The run already finished."),
        },
    )
    def post(self, request: Request, run_id: int) -> Response:
        run = selectors.run_get(run_id=run_id, user=request.user)
        if run is None:
            raise _not_found()
        try:
            run = services.run_cancel(run=run, user=request.user)
        except ServiceError as exc:
            raise api_error(exc) from exc
        return Response(self.OutputSerializer(run).data)
