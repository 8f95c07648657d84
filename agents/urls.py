"""REST API routes (mounted under /api/)."""

from __future__ import annotations

from django.urls import URLPattern, path

from agents.apis import AgentListApi, RunCancelApi, RunDetailApi, RunEventListApi, RunStartApi

urlpatterns: list[URLPattern] = [
    path("agents/", AgentListApi.as_view(), name="api-agent-list"),
    path("agents/<int:agent_id>/runs/", RunStartApi.as_view(), name="api-run-start"),
    path("runs/<int:run_id>/", RunDetailApi.as_view(), name="api-run-detail"),
    path("runs/<int:run_id>/events/", RunEventListApi.as_view(), name="api-run-events"),
    path("runs/<int:run_id>/cancel/", RunCancelApi.as_view(), name="api-run-cancel"),
]
