"""Secrets bound to their address (docs/design.md §1.14), as the admin forms enter them: the write-only
secrets of agents, connectors, http hooks (and channels_im's channel configs) are only sent to the
address they were entered for, and changing that address clears them.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest

SECRETS_BOUND_HELP = (
    " A stored secret is only sent to the address it was entered for ({address}): changing its "
    "scheme, host or port clears the stored secrets, unless you enter them again in the same save."
)


CONNECTOR_BASE_URL_HELP = (
    " Changing its scheme, host or port clears the stored secrets unless you enter them again."
)


class SecretsEntryFormMixin:
    """A write-only secrets form of a model whose secrets are bound to an address
    (``agents.models.SecretsBoundToAddress``): secrets typed in count as entered again, and the
    help texts say what changing the address does. ``secrets_address`` names the address."""

    secrets_address = "the base URL"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields[self.instance.secrets_field]  # type: ignore[attr-defined]
        field.help_text += SECRETS_BOUND_HELP.format(address=self.secrets_address)

    def _note_secrets_entered(self, value: Any) -> Any:
        typed = self.cleaned_data.get(self.instance.secrets_field)  # type: ignore[attr-defined]
        self.instance.secrets_entered = bool(str(typed or "").strip())  # type: ignore[attr-defined]
        return value


class SecretsClearedMessageMixin:
    """Says, after saving, that the stored secrets were cleared because the address changed."""

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)  # type: ignore[misc]
        if change and obj.secrets_cleared:
            self.message_user(  # type: ignore[attr-defined]
                request,
                f"“{obj}”: secrets cleared because the address changed. A stored secret is only sent "
                "to the address it was entered for: enter it again if the new address should get it.",
                messages.WARNING,
            )
