"""The REST decision API of approvers (mounted under ``/api/approvals/``)."""

from __future__ import annotations

from django.urls import URLPattern, path

from approvals.apis import ApprovalBatchDecisionApi, ApprovalDecisionApi, ApprovalDetailApi, ApprovalListApi

urlpatterns: list[URLPattern] = [
    path("", ApprovalListApi.as_view(), name="api-approval-list"),
    path("decisions/", ApprovalBatchDecisionApi.as_view(), name="api-approval-batch-decision"),
    path("<uuid:request_id>/", ApprovalDetailApi.as_view(), name="api-approval-detail"),
    path("<uuid:request_id>/decision/", ApprovalDecisionApi.as_view(), name="api-approval-decision"),
]
