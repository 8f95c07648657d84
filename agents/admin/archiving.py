"""Archive / Unarchive instead of deletion, for organisations, agents and connectors.

Nothing with history is deleted (docs/design.md §1.9): organisations, agents and connectors have no delete
button or action here, for anyone; they have "Archive" / "Unarchive" actions instead, which call
the archiving services (and those check the staff user's role in the object's organisation).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from agents import archiving
from fimone.errors import ServiceError


class ArchivableAdminMixin:
    """Archive / Unarchive actions instead of deletion. ``archive_service`` and
    ``unarchive_service`` are the services' names in ``agents.archiving``, called once per selected
    object with the staff user; each refusal is reported by name, never as an error page."""

    archive_service: str
    unarchive_service: str
    archive_fields = ("archived_at", "archived_by_name")

    @admin.display(description="archived by")
    def archived_by_name(self, obj: Model) -> str:
        """Who archived it, as a name: Django would link the user's admin page, which only
        superusers may open."""
        return str(getattr(obj, "archived_by", None) or "—")

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_archive_permission(self, request: HttpRequest) -> bool:
        """Archiving changes the object: it needs the change permission (the service checks the role)."""
        opts = self.opts  # type: ignore[attr-defined]
        return request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}")

    @admin.display(description="archived", boolean=True, ordering="archived_at")
    def is_archived(self, obj: Model) -> bool:
        return obj.archived_at is not None  # type: ignore[attr-defined]

    @admin.action(description="Archive selected (history is kept)", permissions=["archive"])
    def archive_selected(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._apply(request, queryset, getattr(archiving, self.archive_service), "archived")

    @admin.action(description="Unarchive selected", permissions=["archive"])
    def unarchive_selected(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        service = getattr(archiving, self.unarchive_service)
        self._apply(request, queryset, service, "unarchived", refusal=self.unarchive_refusal)

    def unarchive_refusal(self, request: HttpRequest, obj: Model) -> str | None:
        """Why the staff user may not bring ``obj`` back, in words, or ``None``. Asked before the
        service, which decides again (a subclass asks the service's own check)."""
        return None

    def _apply(
        self,
        request: HttpRequest,
        queryset: QuerySet[Any],
        service: Callable[..., Any],
        done: str,
        *,
        refusal: Callable[[HttpRequest, Model], str | None] | None = None,
    ) -> None:
        # The queryset is already limited to the staff user's organisations (get_queryset); the
        # service checks the role again and records who did it.
        changed: list[str] = []
        refused: list[str] = []
        for obj in queryset.order_by("pk"):
            why = refusal(request, obj) if refusal is not None else None
            if why is not None:
                refused.append(f"{obj}: {why}")
                continue
            try:
                service(**{self.opts.model_name: obj, "user": request.user})  # type: ignore[attr-defined]
            except ServiceError as exc:
                refused.append(f"{obj}: {exc.message}")
            else:
                changed.append(str(obj))
        if changed:
            self.message_user(  # type: ignore[attr-defined]
                request, f"{len(changed)} {done}: " + ", ".join(changed), messages.SUCCESS
            )
        if refused:
            self.message_user(  # type: ignore[attr-defined]
                request, f"Not {done}: " + "; ".join(refused), messages.WARNING
            )
