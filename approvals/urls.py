"""The web inbox of approvers (mounted at ``/approvals/``)."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import URLPattern, path, reverse_lazy

from approvals import views
from fimone.sign_in import SignInForm

app_name = "approvals"

urlpatterns: list[URLPattern] = [
    path("", views.inbox, name="inbox"),
    path("history/", views.history, name="history"),
    path("history/export.csv", views.history_export, name="history-export"),
    path("history/tools/", views.tool_calls, name="tool-calls"),
    path("history/tools/export.csv", views.tool_calls_export, name="tool-calls-export"),
    path("health/", views.queue_health_page, name="queue-health"),
    path("health/export.csv", views.queue_health_export, name="queue-health-export"),
    path("live/", views.inbox_live, name="live"),
    path("batch/", views.request_decide_batch, name="decide-batch"),
    path("away/", views.away, name="away"),
    path("grants/", views.grants, name="grants"),
    path("<uuid:request_id>/", views.request_detail, name="detail"),
    path("<uuid:request_id>/decide/", views.request_decide, name="decide"),
    # The admin's login only admits staff; approvers sign in here (Django's own auth views).
    path(
        "login/",
        auth_views.LoginView.as_view(
            template_name="registration/login.html",
            authentication_form=SignInForm,
            redirect_authenticated_user=True,
            next_page=reverse_lazy("approvals:inbox"),
            extra_context={"sso_next": reverse_lazy("approvals:inbox")},
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(next_page=reverse_lazy("approvals:login")), name="logout"),
]
