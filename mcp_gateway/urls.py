from django.urls import path

from mcp_gateway import views

app_name = "mcp_gateway"

urlpatterns = [
    # Not under /mcp/: that prefix is the gateway's own protocol (fimone.asgi).
    path("connect/", views.connect, name="connect"),
]
