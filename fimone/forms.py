"""Form pieces shared by the admins of every app."""

from __future__ import annotations

from typing import Any

from django import forms

from fimone.parsers import InvalidJSON
from fimone.parsers import loads as json_loads
from fimone.storable import unstorable


class JSONFormField(forms.JSONField):
    """Django's form ``JSONField``, through the bounded reader (:mod:`fimone.parsers`): text nested
    too deep is a validation error on the field, not a ``RecursionError`` and a 500; so is a value
    no database stores (NaN, ±Infinity, NUL: :mod:`fimone.storable`), named in words. Admins use
    it for every model ``JSONField`` (``formfield_for_dbfield``)."""

    def validate(self, value: Any) -> None:
        super().validate(value)
        # Whatever built the value (the text, or a subclass's own inputs): checked before saving.
        problem = unstorable(value)
        if problem is not None:
            raise forms.ValidationError(f"This value cannot be stored: {problem}.", code="unstorable")

    def to_python(self, value: Any) -> Any:
        if self.disabled or not isinstance(value, str) or value in self.empty_values:
            return super().to_python(value)
        try:
            json_loads(value, cls=self.decoder)  # the bounded check; Django then parses it as usual
        except InvalidJSON as exc:
            raise forms.ValidationError(f"Enter a valid JSON: {exc}.", code="invalid") from None
        return super().to_python(value)

    def bound_data(self, data: Any, initial: Any) -> Any:
        # Re-displaying a refused value parses it again: it is shown back as the text typed.
        if isinstance(data, str) and not self.disabled:
            try:
                json_loads(data, cls=self.decoder)
            except InvalidJSON:
                return forms.fields.InvalidJSONInput(data)
        return super().bound_data(data, initial)


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
            value = json_loads(text)
        except InvalidJSON as exc:
            # Its message names the position only: the text typed is a secret and must not come back.
            raise forms.ValidationError(str(exc)) from None
        if not isinstance(value, dict):
            raise forms.ValidationError("must be a JSON object of named secrets")
        return value or None


def secrets_state(secrets: Any) -> str:
    """What an admin page says of stored secrets: their key names, never their values."""
    if not secrets:
        return "none"
    keys = ", ".join(sorted(secrets)) if isinstance(secrets, dict) else "?"
    return f"set (encrypted): {keys}"
