"""The sign-in forms of the portal, the approvals inbox and the admin, saying why a password was
refused when an authentication backend said why.

A backend that refuses a correct password for a reason the person can act on (their organisation
signs in through its identity provider: ``sso.backends``) puts that reason on the request as
:data:`REFUSAL` and raises ``PermissionDenied``; these forms show it instead of the generic "enter a
correct username and password". The backend lives above this module: it signals up through the
request, nothing here imports it.
"""

from __future__ import annotations

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError

REFUSAL = "sign_in_refusal"
"""The request attribute holding a backend's reason for refusing a password (a plain sentence)."""


def _refusal_or(form: AuthenticationForm, error: ValidationError) -> ValidationError:
    reason = getattr(form.request, REFUSAL, None)
    return ValidationError(reason, code="refused") if reason else error


class SignInForm(AuthenticationForm):
    def get_invalid_login_error(self) -> ValidationError:
        return _refusal_or(self, super().get_invalid_login_error())


class AdminSignInForm(AdminAuthenticationForm):
    def get_invalid_login_error(self) -> ValidationError:
        return _refusal_or(self, super().get_invalid_login_error())
