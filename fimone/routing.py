"""WebSocket routes; every consumer authenticates in ``connect``."""

from __future__ import annotations

from django.urls import path

from agents.consumers import RunStreamConsumer

websocket_urlpatterns = [
    path("ws/runs/<int:run_id>/", RunStreamConsumer.as_asgi()),
]
