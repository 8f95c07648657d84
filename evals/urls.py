"""REST API routes of evals (mounted under /api/)."""

from __future__ import annotations

from django.urls import URLPattern, path

from evals.apis import EvalRunDetailApi, EvalRunStartApi, EvalSetListApi

urlpatterns: list[URLPattern] = [
    path("eval-sets/", EvalSetListApi.as_view(), name="api-eval-set-list"),
    path("eval-sets/<int:eval_set_id>/runs/", EvalRunStartApi.as_view(), name="api-eval-run-start"),
    path("eval-runs/<int:eval_run_id>/", EvalRunDetailApi.as_view(), name="api-eval-run-detail"),
]
