"""The forms of the chat page: a message, a conversation's new title, a decision on an approval
request; and the words that tell what is wrong with one."""

from __future__ import annotations

from django import forms

from agents.models import Conversation

MAX_MESSAGE_LENGTH = 8000
MAX_REASON_LENGTH = 2000


class MessageForm(forms.Form):
    message = forms.CharField(max_length=MAX_MESSAGE_LENGTH, strip=True)

    def clean_message(self) -> str:
        # Browsers send a textarea's line breaks as CRLF; the agent reads them as typed.
        return self.cleaned_data["message"].replace("\r\n", "\n").replace("\r", "\n")


class RenameForm(forms.Form):
    title = forms.CharField(max_length=Conversation._meta.get_field("title").max_length, strip=True)


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    reason = forms.CharField(required=False, max_length=MAX_REASON_LENGTH, strip=True)


def form_problem(form: forms.Form) -> str:
    """The first problem of an invalid form, as a flash message: ``Check your message: …``."""
    field, errors = next(iter(form.errors.items()))
    label = {"message": "your message", "title": "the title"}.get(field, field)
    return f"Check {label}: {errors[0]}"
