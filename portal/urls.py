"""The portal, mounted at ``/``."""

from __future__ import annotations

from django.urls import URLPattern, path

from portal.views import approval_requests, chat, chat_controls, home_pages, runs, sign_in

app_name = "portal"

urlpatterns: list[URLPattern] = [
    path("", home_pages.home, name="home"),
    path("login/", sign_in.login, name="login"),
    path("logout/", sign_in.logout, name="logout"),
    path("agents/", home_pages.agents_page, name="agents"),
    path("agents/<int:agent_id>/", chat.agent_chat, name="agent"),
    path("conversations/", home_pages.conversation_list, name="conversations"),
    path("conversations/<int:conversation_id>/", chat.conversation, name="conversation"),
    path(
        "conversations/<int:conversation_id>/stop/", chat_controls.conversation_stop, name="conversation-stop"
    ),
    path(
        "conversations/<int:conversation_id>/retry/",
        chat_controls.conversation_retry,
        name="conversation-retry",
    ),
    path(
        "conversations/<int:conversation_id>/rename/",
        chat_controls.conversation_rename_view,
        name="conversation-rename",
    ),
    path(
        "conversations/<int:conversation_id>/archive/",
        chat_controls.conversation_archive_view,
        name="conversation-archive",
    ),
    path(
        "conversations/<int:conversation_id>/restore/",
        chat_controls.conversation_restore,
        name="conversation-restore",
    ),
    path("runs/<int:run_id>/", runs.run_page, name="run"),
    path("runs/<int:run_id>/events/<int:seq>/html/", runs.event_html, name="event-html"),
    path("requests/<uuid:request_id>/", approval_requests.request_state, name="request-state"),
    path("requests/<uuid:request_id>/decide/", approval_requests.request_decide, name="request-decide"),
]
