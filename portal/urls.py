"""The portal, mounted at ``/``."""

from __future__ import annotations

from django.urls import URLPattern, path

from portal import views

app_name = "portal"

urlpatterns: list[URLPattern] = [
    path("", views.home, name="home"),
    path("login/", views.login, name="login"),
    path("logout/", views.logout, name="logout"),
    path("agents/", views.agents_page, name="agents"),
    path("agents/<int:agent_id>/", views.agent_chat, name="agent"),
    path("conversations/", views.conversation_list, name="conversations"),
    path("conversations/<int:conversation_id>/", views.conversation, name="conversation"),
    path("conversations/<int:conversation_id>/stop/", views.conversation_stop, name="conversation-stop"),
    path("conversations/<int:conversation_id>/retry/", views.conversation_retry, name="conversation-retry"),
    path(
        "conversations/<int:conversation_id>/rename/",
        views.conversation_rename_view,
        name="conversation-rename",
    ),
    path(
        "conversations/<int:conversation_id>/archive/",
        views.conversation_archive_view,
        name="conversation-archive",
    ),
    path(
        "conversations/<int:conversation_id>/restore/",
        views.conversation_restore,
        name="conversation-restore",
    ),
    path("runs/<int:run_id>/", views.run_page, name="run"),
    path("runs/<int:run_id>/events/<int:seq>/html/", views.event_html, name="event-html"),
    path("requests/<uuid:request_id>/", views.request_state, name="request-state"),
    path("requests/<uuid:request_id>/decide/", views.request_decide, name="request-decide"),
]
