from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from approvals.metrics import metrics
from fimone.health import healthz, readyz
from tenancy.views import InvitationPasswordView, invitation

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="health"),
    path("readyz", readyz, name="ready"),
    path("metrics", metrics, name="metrics"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("approvals/", include("approvals.urls")),
    path("api/approvals/", include("approvals.api_urls")),
    path("api/", include("agents.urls")),
    path("api/", include("workflows.urls")),
    path("api/", include("evals.urls")),
    path("im/", include("channels_im.urls")),
    path("sso/", include("sso.urls")),
    path("", include("mcp_gateway.urls")),
    path("invitations/<str:token>/", invitation, name="invitation"),
    path(
        "invitations/<str:invitation>/password/<uidb64>/<token>/",
        InvitationPasswordView.as_view(),
        name="invitation-password",
    ),
]
if settings.FIMONE_ENV == "development":
    # The demo target service pays with a token anyone can read in the docs: never in production.
    urlpatterns.append(path("demo/", include("demo_payments.urls")))
urlpatterns.append(path("", include("portal.urls")))

# Friendly error pages (never a debug page or a bare server message).
handler400 = "portal.views.bad_request"
handler403 = "portal.views.permission_denied"
handler404 = "portal.views.page_not_found"
handler500 = "portal.views.server_error"
