"""Form pieces shared by the admins of every app."""

from __future__ import annotations

import json
from typing import Any

from django import forms


class WriteOnlyTextarea(forms.Textarea):
    """A textarea that never renders a value, like ``PasswordInput(render_value=False)``."""

    def format_value(self, value: Any) -> str | None:
        return None


class WriteOnlySecretsForm(forms.ModelForm):
    """Base of admin forms for models with an encrypted ``secrets`` JSON field.

    The field is write-only: the page never shows the stored value, blank keeps it, any text must
    be a JSON object (``{}`` clears it), and an error never echoes what was typed. Subclasses set
    ``secrets_example`` (shown in the help text) and their own ``Meta``.
    """

    secrets_example = ""

    secrets = forms.CharField(
        required=False,
        widget=WriteOnlyTextarea(attrs={"rows": 4, "autocomplete": "off", "spellcheck": "false"}),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.initial.pop("secrets", None)  # the stored value never reaches the page
        example = f", e.g. {self.secrets_example}" if self.secrets_example else ""
        self.fields["secrets"].help_text = (
            f"A JSON object, encrypted at rest and never shown again{example} — "
            "leave blank to keep the current secrets."
        )

    def clean_secrets(self) -> dict[str, Any] | None:
        text = (self.cleaned_data.get("secrets") or "").strip()
        if not text:
            return self.instance.secrets if self.instance.pk else None
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            # Name the position only: the text typed is a secret and must not come back.
            raise forms.ValidationError(
                f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
            ) from None
        if not isinstance(value, dict):
            raise forms.ValidationError("must be a JSON object of named secrets")
        return value or None


def secrets_state(secrets: Any) -> str:
    """What an admin page says of stored secrets: their key names, never their values."""
    if not secrets:
        return "none"
    keys = ", ".join(sorted(secrets)) if isinstance(secrets, dict) else "?"
    return f"set (encrypted): {keys}"
