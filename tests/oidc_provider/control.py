"""Control endpoints of the test provider, for the tests only (this project is never deployed):
JSON in, JSON out, CSRF-exempt, and refused (403) unless ``X-Control-Token`` equals
``OIDC_PROVIDER_CONTROL_TOKEN``. ``GET /control/ping`` answers ``ok`` to anyone (health check)."""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST
from oauth2_provider.models import get_application_model

JsonView = Callable[[dict[str, Any]], JsonResponse]


class BadRequest(Exception):
    """A body the endpoint cannot act on: answered 400 with the message."""


def _authorised(request: HttpRequest) -> bool:
    expected = settings.OIDC_PROVIDER_CONTROL_TOKEN
    given = request.headers.get("X-Control-Token", "")
    return bool(expected) and hmac.compare_digest(given.encode(), expected.encode())


def control_endpoint(view: JsonView) -> Callable[[HttpRequest], HttpResponse]:
    """A POST endpoint behind the control token, fed the request's JSON object."""

    @csrf_exempt
    @require_POST
    @wraps(view)
    def endpoint(request: HttpRequest) -> HttpResponse:
        if not _authorised(request):
            return JsonResponse({"error": "forbidden"}, status=403)
        try:
            body = json.loads(request.body or b"{}")
            if not isinstance(body, dict):
                raise BadRequest("the body must be a JSON object")
            with transaction.atomic():
                return view(body)
        except (ValueError, BadRequest) as error:  # json.JSONDecodeError is a ValueError
            return JsonResponse({"error": str(error)}, status=400)
        except ValidationError as error:
            return JsonResponse(
                {"error": error.message_dict if hasattr(error, "error_dict") else error.messages}, status=400
            )

    return endpoint


def _text(body: dict[str, Any], name: str, *, default: str | None = None) -> str:
    value = body.get(name, default)
    if not isinstance(value, str) or (default is None and not value):
        raise BadRequest(f"{name!r} must be a non-empty string")
    return value


def _texts(body: dict[str, Any], name: str, *, required: bool) -> list[str]:
    value = body.get(name, None if required else [])
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise BadRequest(f"{name!r} must be a list of non-empty strings")
    if required and not value:
        raise BadRequest(f"{name!r} must not be empty")
    return value


@require_GET
def ping(request: HttpRequest) -> HttpResponse:
    """``ok`` to anyone; the header ``X-Control-Authorised`` (``yes``/``no``) tells the kit whether
    the control token it sent is this provider's, i.e. whether it reached its own process."""
    response = HttpResponse("ok", content_type="text/plain")
    response["X-Control-Authorised"] = "yes" if _authorised(request) else "no"
    return response


@control_endpoint
def users(body: dict[str, Any]) -> JsonResponse:
    """Create or update the user ``username``: its password, e-mail and names, and exactly the
    groups listed (created as needed)."""
    user_model = get_user_model()
    user, _ = user_model.objects.get_or_create(username=_text(body, "username"))
    user.set_password(_text(body, "password"))
    user.email = _text(body, "email", default="")
    user.first_name = _text(body, "first_name", default="")
    user.last_name = _text(body, "last_name", default="")
    user.is_active = True
    user.save()
    groups = [Group.objects.get_or_create(name=name)[0] for name in _texts(body, "groups", required=False)]
    user.groups.set(groups)
    return JsonResponse({"id": user.pk})


@control_endpoint
def clients(body: dict[str, Any]) -> JsonResponse:
    """Create or update the application ``client_id``: a confidential client of the authorization
    code grant, its ID tokens signed RS256, no consent page, the redirect URIs given. The secret is
    stored hashed (DOT's default) from the plaintext given, which is what a token request sends."""
    application_model = get_application_model()
    client_id = _text(body, "client_id")
    application = application_model.objects.filter(client_id=client_id).first()
    if application is None:
        application = application_model(client_id=client_id)
    application.name = _text(body, "name", default=client_id)
    application.client_type = application_model.CLIENT_CONFIDENTIAL
    application.authorization_grant_type = application_model.GRANT_AUTHORIZATION_CODE
    application.algorithm = application_model.RS256_ALGORITHM
    application.skip_authorization = True
    application.redirect_uris = " ".join(_texts(body, "redirect_uris", required=True))
    application.post_logout_redirect_uris = " ".join(
        _texts(body, "post_logout_redirect_uris", required=False)
    )
    # Set as plaintext on every call: ClientSecretField hashes it on save (hash_client_secret).
    application.hash_client_secret = True
    application.client_secret = _text(body, "client_secret")
    application.full_clean()
    application.save()
    return JsonResponse({"id": application.pk})
