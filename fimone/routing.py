"""WebSocket routes; every consumer authenticates in ``connect``."""

from __future__ import annotations

from django.urls import path

from approvals.consumers import InboxConsumer, RunWatchConsumer

websocket_urlpatterns = [
    # The run stream of agents.consumers, open to everyone who may read the run behind a request.
    path("ws/runs/<int:run_id>/", RunWatchConsumer.as_asgi()),
    path("ws/inbox/", InboxConsumer.as_asgi()),
]
