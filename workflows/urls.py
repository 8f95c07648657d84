"""REST API routes of workflows (mounted under /api/)."""

from __future__ import annotations

from django.urls import URLPattern, path

from workflows.apis import (
    WorkflowDetailApi,
    WorkflowListApi,
    WorkflowRunCancelApi,
    WorkflowRunDetailApi,
    WorkflowRunStartApi,
)

urlpatterns: list[URLPattern] = [
    path("workflows/", WorkflowListApi.as_view(), name="api-workflow-list"),
    path("workflows/<int:workflow_id>/", WorkflowDetailApi.as_view(), name="api-workflow-detail"),
    path("workflows/<int:workflow_id>/runs/", WorkflowRunStartApi.as_view(), name="api-workflow-run-start"),
    path(
        "workflow-runs/<int:workflow_run_id>/", WorkflowRunDetailApi.as_view(), name="api-workflow-run-detail"
    ),
    path(
        "workflow-runs/<int:workflow_run_id>/cancel/",
        WorkflowRunCancelApi.as_view(),
        name="api-workflow-run-cancel",
    ),
]
