"""The REST decision API of approvers (mounted under ``/api/approvals/``).

Thin views (HackSoft style): each validates its input with a nested serializer, reads through
``approvals.selectors`` and writes through the one service call ``confirmation_decide``. Requests
the caller may not read are reported as 404. A decision is answered with the service's outcome
whatever it is, under the status that says what happened: 200 the caller's verdict stands, 403 the
caller may not decide, 404 no such request, 409 the request was already final (or expired).
"""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_serializer,
)
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, Throttled
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.models import RunStatus
from approvals import selectors
from approvals.models import ConfirmationEvent, ConfirmationRequest, ConfirmationStatus
from approvals.selectors import display_name
from approvals.services import (
    ARGS_CHANGED,
    INVALID_EDIT,
    MAX_BATCH,
    MAX_REASON_LENGTH,
    BatchItem,
    DecisionOutcome,
    check_batch,
    confirmation_decide,
    confirmation_decide_batch,
)
from fimone.throttling import ScopedUserRateThrottle


@extend_schema_serializer(component_name="ApprovalPerson")
class PersonSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    name = serializers.SerializerMethodField()

    def get_name(self, user: Any) -> str:
        return display_name(user)


@extend_schema_serializer(component_name="ApprovalAgent")
class AgentRefSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    name = serializers.CharField()


@extend_schema_serializer(component_name="ApprovalOutcome")
class OutcomeSerializer(serializers.Serializer):
    accepted = serializers.BooleanField(help_text="True only for the decision that set the verdict.")
    status = serializers.CharField(
        help_text='"approved"/"rejected" when accepted; "recorded" for a vote towards a quorum that '
        'still waits; else "refused", "not_found", "expired", "already_voted", "invalid_edit", '
        '"args_changed" or the verdict already given.'
    )
    message = serializers.CharField()


@extend_schema_serializer(component_name="ApprovalStageRef")
class StageRefSerializer(serializers.Serializer):
    """The stage a staged request is at (``null`` for a request without stages)."""

    number = serializers.IntegerField(help_text="1 for the first stage.")
    of = serializers.IntegerField(help_text="How many stages the request has.")
    name = serializers.CharField()
    approvals_required = serializers.IntegerField(help_text="This stage's quorum.")


def stage_ref(request: Any) -> dict[str, Any] | None:
    plan = request.stage_plan or []
    if not plan or request.stage_index >= len(plan):
        return None
    return {
        "number": request.stage_index + 1,
        "of": len(plan),
        "name": plan[request.stage_index].get("name", ""),
        "approvals_required": request.approvals_required,
    }


class ApprovalListApi(APIView):
    """The caller's inbox: pending, unexpired requests they may decide, soonest deadline first."""

    @extend_schema_serializer(component_name="ApprovalRequest")
    class OutputSerializer(serializers.Serializer):
        id = serializers.UUIDField()
        tool = serializers.CharField(source="tool_name")
        args_sha256 = serializers.CharField(
            help_text="The hash of `arguments`: send it back with an approval to approve exactly them."
        )
        arguments = serializers.JSONField(source="tool_args", help_text="Exactly the arguments to approve.")
        agent = AgentRefSerializer()
        requested_by = PersonSerializer()
        created_at = serializers.DateTimeField()
        expires_at = serializers.DateTimeField()
        channel = serializers.CharField(help_text='Where the card went ("web" for the web inbox).')
        stage = serializers.SerializerMethodField()

        @extend_schema_field(StageRefSerializer(allow_null=True))
        def get_stage(self, request: Any) -> dict[str, Any] | None:
            return stage_ref(request)

    @extend_schema(
        operation_id="approvals_list", tags=["approvals"], responses={200: OutputSerializer(many=True)}
    )
    def get(self, request: Request) -> Response:
        requests = selectors.inbox_for(user=request.user)
        return Response(self.OutputSerializer(requests, many=True).data)


class ApprovalDetailApi(APIView):
    """One request, for its approvers, its requester and its organisation's auditors and admins."""

    @extend_schema_serializer(component_name="ApprovalRequestDetail")
    class OutputSerializer(ApprovalListApi.OutputSerializer):
        @extend_schema_serializer(component_name="ApprovalRun")
        class RunSerializer(serializers.Serializer):
            id = serializers.IntegerField(source="pk")
            status = serializers.ChoiceField(choices=RunStatus.choices)

        @extend_schema_serializer(component_name="ApprovalEvent")
        class EventSerializer(serializers.Serializer):
            kind = serializers.ChoiceField(choices=ConfirmationEvent.Kind.choices)
            actor = PersonSerializer(allow_null=True)
            actor_external_id = serializers.CharField()
            details = serializers.JSONField()
            created_at = serializers.DateTimeField()

        status = serializers.ChoiceField(choices=ConfirmationStatus.choices)
        responded_by = PersonSerializer(allow_null=True)
        responded_at = serializers.DateTimeField(allow_null=True)
        reason = serializers.CharField()
        run = RunSerializer()
        events = serializers.SerializerMethodField(help_text="The append-only log, oldest first.")

        @extend_schema_field(EventSerializer(many=True))
        def get_events(self, confirmation: ConfirmationRequest) -> list[dict[str, Any]]:
            events = selectors.request_events(request=confirmation)
            return self.EventSerializer(events, many=True).data

    @extend_schema(
        operation_id="approvals_retrieve",
        tags=["approvals"],
        responses={
            200: OutputSerializer,
            404: OpenApiResponse(description="No such request visible to the caller."),
        },
    )
    def get(self, request: Request, request_id: uuid.UUID) -> Response:
        confirmation = selectors.request_get(request_id=request_id, user=request.user)
        if confirmation is None:
            raise NotFound()
        return Response(self.OutputSerializer(confirmation).data)


def _outcome_status(outcome: DecisionOutcome) -> int:
    if outcome.counted:  # the verdict, or a vote towards a quorum that still waits
        return status.HTTP_200_OK
    if outcome.refused:
        return status.HTTP_403_FORBIDDEN
    if outcome.status in (INVALID_EDIT, ARGS_CHANGED):
        return status.HTTP_400_BAD_REQUEST
    if outcome.status == "not_found":
        return status.HTTP_404_NOT_FOUND
    return status.HTTP_409_CONFLICT


class DecisionThrottle(ScopedUserRateThrottle):
    """``DECISION_RATE`` per user, shared by this API and the web inbox's decide view."""

    scope = "decision"
    what = "decisions"


class ApprovalDecisionApi(APIView):
    """Approve or reject a request. Only the first verdict counts; every attempt is logged."""

    throttle_classes = [DecisionThrottle]

    @extend_schema_serializer(component_name="ApprovalDecision")
    class InputSerializer(serializers.Serializer):
        decision = serializers.ChoiceField(choices=["approve", "reject"])
        reason = serializers.CharField(
            required=False,
            allow_blank=True,
            default="",
            max_length=MAX_REASON_LENGTH,
            help_text="Optional; the LLM reads it when the call is rejected.",
        )
        args_sha256 = serializers.CharField(
            required=False,
            default="",
            allow_blank=True,
            max_length=64,
            help_text="Optional: the `args_sha256` of the arguments the caller reviewed. Needed to "
            "approve arguments another approver changed; refused if they changed since.",
        )
        arguments = serializers.JSONField(
            required=False,
            default=None,
            help_text="Optional, with `approve` when the policy allows edits: the arguments to run "
            "instead of the proposed ones (a JSON object within the tool's parameter schema).",
        )

    OutputSerializer = OutcomeSerializer

    @extend_schema(
        operation_id="approvals_decide",
        tags=["approvals"],
        request=InputSerializer,
        responses={
            200: OpenApiResponse(
                OutputSerializer,
                description="The caller's verdict was recorded (status `recorded`: a vote towards "
                "a quorum that still waits for more approvals).",
            ),
            400: OpenApiResponse(
                description="Invalid input: `{field: [message]}`; or edited arguments that were "
                "refused (status `invalid_edit`, nothing recorded)."
            ),
            403: OpenApiResponse(OutputSerializer, description="The caller may not decide this request."),
            404: OpenApiResponse(OutputSerializer, description="No such request."),
            409: OpenApiResponse(OutputSerializer, description="The request was already final or expired."),
            429: OpenApiResponse(description="Too many decisions: `detail` says so; see `Retry-After`."),
        },
    )
    def post(self, request: Request, request_id: uuid.UUID) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        outcome = confirmation_decide(
            request_id=request_id,
            user=request.user,
            approve=data["decision"] == "approve",
            reason=data["reason"],
            edited_args=data["arguments"],
            seen_args_sha256=data["args_sha256"],
        )
        return Response(self.OutputSerializer(outcome).data, status=_outcome_status(outcome))


class ApprovalBatchDecisionApi(APIView):
    """Approve or reject several requests with one reason: each decided as alone (the caller's
    eligibility, the arguments' hash, the quorum, the one verdict), each outcome answered."""

    @extend_schema_serializer(component_name="ApprovalBatchDecision")
    class InputSerializer(serializers.Serializer):
        @extend_schema_serializer(component_name="ApprovalBatchItem")
        class ItemSerializer(serializers.Serializer):
            id = serializers.UUIDField()
            args_sha256 = serializers.CharField(
                required=False,
                default="",
                allow_blank=True,
                max_length=64,
                help_text="Optional: the `args_sha256` the caller reviewed (see the single decision).",
            )

        decision = serializers.ChoiceField(choices=["approve", "reject"])
        reason = serializers.CharField(
            required=False, allow_blank=True, default="", max_length=MAX_REASON_LENGTH
        )
        requests = ItemSerializer(many=True, allow_empty=False, max_length=MAX_BATCH)

    @extend_schema_serializer(component_name="ApprovalBatchOutcome")
    class OutputSerializer(serializers.Serializer):
        @extend_schema_serializer(component_name="ApprovalBatchLine")
        class LineSerializer(serializers.Serializer):
            id = serializers.UUIDField(source="request_id")
            accepted = serializers.BooleanField(source="outcome.accepted")
            status = serializers.CharField(source="outcome.status", help_text="As the single decision's.")
            message = serializers.CharField(source="outcome.message")

        results = LineSerializer(many=True)

    @extend_schema(
        operation_id="approvals_decide_batch",
        tags=["approvals"],
        request=InputSerializer,
        responses={
            200: OpenApiResponse(
                OutputSerializer,
                description="Every request's outcome, in the order given (a request listed twice is "
                "decided once): as `POST /api/approvals/{id}/decision/` would have answered it.",
            ),
            400: OpenApiResponse(
                description="Invalid input (none, or more than 100 requests): nothing decided."
            ),
            429: OpenApiResponse(
                description="The batch does not fit in the caller's decision rate (it counts as one "
                "decision per request): nothing decided; see `Retry-After`."
            ),
        },
    )
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        items = check_batch([BatchItem(item["id"], item["args_sha256"]) for item in data["requests"]])
        refused = DecisionThrottle().refusal_for_user_taking(request.user.pk, len(items))
        if refused is not None:
            raise Throttled(
                wait=refused.wait, detail=f"{refused.message} Nothing of the {len(items)} was decided."
            )
        lines = confirmation_decide_batch(
            items=items, user=request.user, approve=data["decision"] == "approve", reason=data["reason"]
        )
        return Response({"results": self.OutputSerializer.LineSerializer(lines, many=True).data})
