"""The "Replay over past calls" pages of an agent: a proposed hook chain (the current one, the one of
a past moment, or a hooks file with edits not saved) tried on a window of the agent's recorded
calls, with the calls whose outcome would change (``console.chain_replay``).

Who may: the agent's operators and admins (another organisation's agent is not found: 404; an
auditor may not: 403). A replay runs as a task; its page shows its progress until it ends, then
the changes, their counts per change and per hook, and a CSV download.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import path, reverse
from django.utils import timezone

from agents.admin.scoping import manages
from agents.hook_declarations import HookFileError, hooks_export
from agents.models import Agent, ChainReplay
from agents.tools.base import readable_tool_name
from console.admin.subpages import agent_subpage
from console.chain_replay import (
    MAX_CALLS,
    Window,
    chain_as_of,
    chain_current,
    chain_from_file,
    chain_replay_start,
    replay_csv,
)
from console.chain_trial import agent_tool_specs, tool_choices
from console.tasks import chain_replay_task
from fimone.errors import ServiceError

CURRENT, AS_OF, FILE = "current", "as_of", "file"


class ReplayForm(forms.Form):
    """Which chain, over which calls."""

    source = forms.ChoiceField(
        label="Chain",
        choices=[
            (CURRENT, "The current chain"),
            (AS_OF, "The chain as it was at a past moment"),
            (FILE, "A hooks file (the agent's own hooks replaced by the file's, nothing saved)"),
        ],
        initial=CURRENT,
        widget=forms.RadioSelect,
    )
    as_of = forms.DateTimeField(
        required=False,
        label="At (UTC)",
        help_text="yyyy-mm-dd hh:mm, for a past chain: its hooks as their history has them then.",
    )
    hooks_file = forms.CharField(
        required=False,
        label="Hooks file",
        widget=forms.Textarea(attrs={"rows": 10, "cols": 80, "spellcheck": "false"}),
        help_text="The agent's own hooks now, as manage.py hooks export writes them: edit them here "
        "(add, remove, change a parameter or a mode) and replay; nothing is saved.",
    )
    last = forms.IntegerField(
        label="Calls", min_value=1, max_value=MAX_CALLS, initial=1_000, help_text="The most recent ones."
    )
    since = forms.DateField(required=False, label="From (UTC)", help_text="yyyy-mm-dd")
    until = forms.DateField(required=False, label="Until (UTC)", help_text="yyyy-mm-dd, that day included")
    tool = forms.ChoiceField(required=False, label="Tool")

    def __init__(self, *args: Any, tools: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["tool"].choices = [("", "— any tool —"), *tool_choices(tools)]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        source = cleaned.get("source")
        if source == AS_OF and not cleaned.get("as_of"):
            self.add_error("as_of", "Give the moment whose chain to replay.")
        if source == FILE and not (cleaned.get("hooks_file") or "").strip():
            self.add_error("hooks_file", "Paste the hooks file to replay.")
        since, until = cleaned.get("since"), cleaned.get("until")
        if since and until and since > until:
            self.add_error("until", "The window ends before it starts.")
        return cleaned

    def window(self) -> Window:
        data = self.cleaned_data

        def midnight(day: dt.date | None, *, after: bool = False) -> dt.datetime | None:
            if day is None:
                return None
            return dt.datetime.combine(day + dt.timedelta(days=1 if after else 0), dt.time(), dt.UTC)

        return Window(
            last=data["last"],
            since=midnight(data.get("since")),
            until=midnight(data.get("until"), after=True),
            tool=data.get("tool") or "",
        )


def replay_urls(model_admin: admin.ModelAdmin) -> list[Any]:
    """The pages, for the agent admin's ``get_urls``."""

    def wrap(view: Any) -> Any:
        def bound(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            return view(model_admin, request, *args, **kwargs)

        return model_admin.admin_site.admin_view(bound)

    return [
        path("<path:object_id>/replay/", wrap(replay_view), name="agents_agent_replay"),
        path(
            "<path:object_id>/replay/<int:replay_id>/",
            wrap(replay_result_view),
            name="agents_agent_replay_result",
        ),
        path(
            "<path:object_id>/replay/<int:replay_id>/csv/",
            wrap(replay_csv_view),
            name="agents_agent_replay_csv",
        ),
    ]


def _agent_or_refuse(model_admin: admin.ModelAdmin, request: HttpRequest, object_id: str) -> Agent:
    agent = model_admin.get_object(request, object_id)
    if agent is None or not model_admin.has_view_or_change_permission(request, agent):
        raise Http404("No such agent.")
    if not manages(request, agent):
        raise PermissionDenied("Only the agent's operators may replay its chain.")
    return agent


def _agent_and_replay(
    model_admin: admin.ModelAdmin, request: HttpRequest, object_id: str, replay_id: int
) -> tuple[Agent, ChainReplay]:
    """The agent (refused as :func:`_agent_or_refuse` does) and one of its replays (404 for a
    replay of another agent)."""
    agent = _agent_or_refuse(model_admin, request, object_id)
    replay = ChainReplay.objects.filter(pk=replay_id, agent=agent).first()
    if replay is None:
        raise Http404("No such replay.")
    return agent, replay


def _chain(agent: Agent, form: ReplayForm, actor: Any) -> tuple[dict[str, Any], str]:
    data = form.cleaned_data
    if data["source"] == AS_OF:
        when = data["as_of"]
        when = when if timezone.is_aware(when) else when.replace(tzinfo=dt.UTC)
        return chain_as_of(agent=agent, when=when), f"the chain as of {when:%Y-%m-%d %H:%M} UTC"
    if data["source"] == FILE:
        return chain_from_file(agent=agent, text=data["hooks_file"], actor=actor), "a hooks file"
    return chain_current(agent=agent), "the current chain"


def replay_view(model_admin: admin.ModelAdmin, request: HttpRequest, object_id: str) -> HttpResponse:
    """The form (and the agent's earlier replays); a valid post starts a replay and goes to it."""
    agent = _agent_or_refuse(model_admin, request, object_id)
    # The file starts as the agent's hooks now: an operator edits it rather than writing it.
    initial = {"hooks_file": hooks_export(agent=agent)}
    form = ReplayForm(request.POST or None, tools=agent_tool_specs(agent), initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            chain, label = _chain(agent, form, request.user)
            with transaction.atomic():
                replay = chain_replay_start(
                    agent=agent, actor=request.user, chain=chain, label=label, window=form.window()
                )
                transaction.on_commit(lambda: chain_replay_task.delay(replay.pk))
            return HttpResponseRedirect(
                reverse("admin:agents_agent_replay_result", args=[agent.pk, replay.pk])
            )
        except HookFileError as exc:
            form.add_error("hooks_file", list(exc.problems))
        except ServiceError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
    return agent_subpage(
        model_admin,
        request,
        agent,
        "admin/agents/agent/replay.html",
        title=f"Replay a hook chain over {agent.name}'s past calls",
        form=form,
        replays=ChainReplay.objects.filter(agent=agent)[:10],
    )


def replay_result_view(
    model_admin: admin.ModelAdmin, request: HttpRequest, object_id: str, replay_id: int
) -> HttpResponse:
    """A replay: its progress while it runs (the page reloads itself), then what it found."""
    agent, replay = _agent_and_replay(model_admin, request, object_id, replay_id)
    titles = {name: spec.display for name, spec in agent_tool_specs(agent).items()}
    return agent_subpage(
        model_admin,
        request,
        agent,
        "admin/agents/agent/replay_result.html",
        title=f"Replay of {replay.chain_label} over {agent.name}'s past calls",
        replay=replay,
        summary=replay.summary or {},
        # Each call's tool by its title (a tool the agent no longer has: its name made readable).
        changes=[
            {**change, "title": titles.get(change["tool"]) or readable_tool_name(change["tool"])}
            for change in replay.changes or []
        ],
    )


def replay_csv_view(
    model_admin: admin.ModelAdmin, request: HttpRequest, object_id: str, replay_id: int
) -> HttpResponse:
    agent, replay = _agent_and_replay(model_admin, request, object_id, replay_id)
    response = HttpResponse(replay_csv(replay), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="replay-{agent.pk}-{replay.pk}.csv"'
    return response
