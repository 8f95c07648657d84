"""The authentication backends: OpenID Connect through an organisation's provider, and passwords
where the organisation still allows them.

:class:`OidcBackend` is mozilla-django-oidc's backend made per provider: the library runs the code
flow (state, nonce and PKCE kept in the session by the views, the code exchanged at the token
endpoint); this class verifies the ID token itself — signature against the provider's published
keys (cached, re-fetched when a new key id appears), issuer, audience (and ``azp`` when there are
several), expiry within ``SSO_CLOCK_SKEW_SECONDS``, and the nonce of this very sign-in — which the
library does only in part (it verifies neither issuer nor audience), and finds the account by the
provider's subject, never by e-mail alone (:mod:`sso.services`).
"""

from __future__ import annotations

import hmac
from typing import Any

import jwt
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings

from fimone.sign_in import REFUSAL
from fimone.throttling import client_ip
from sso import selectors, services
from sso.discovery import Metadata, metadata_of, signing_key
from sso.models import IdentityProvider, SignInRecord
from sso.services import SignInRefused
from tenancy.models import Membership, Role

PROVIDER = "sso_provider"
"""The request attribute the callback view sets to the provider of the sign-in it completes."""


def provider_settings(provider: IdentityProvider, metadata: Metadata, attr: str, *args: Any) -> Any:
    """mozilla-django-oidc's ``OIDC_*`` settings for one provider (the rest from Django's)."""
    per_provider = {
        "OIDC_OP_AUTHORIZATION_ENDPOINT": metadata.authorization_endpoint,
        "OIDC_OP_TOKEN_ENDPOINT": metadata.token_endpoint,
        "OIDC_OP_USER_ENDPOINT": metadata.userinfo_endpoint,
        "OIDC_OP_JWKS_ENDPOINT": metadata.jwks_uri,
        "OIDC_RP_CLIENT_ID": provider.client_id,
        "OIDC_RP_CLIENT_SECRET": provider.client_secret,
        "OIDC_RP_SIGN_ALGO": metadata.algorithm,
        "OIDC_RP_SCOPES": provider.scopes,
        "OIDC_USE_NONCE": True,
        "OIDC_USE_PKCE": True,
        "OIDC_PKCE_CODE_CHALLENGE_METHOD": "S256",
        "OIDC_AUTHENTICATION_CALLBACK_URL": "sso:callback",
        "OIDC_STORE_ID_TOKEN": True,
        "OIDC_TIMEOUT": settings.SSO_HTTP_TIMEOUT,
        "OIDC_VERIFY_SSL": True,
        "OIDC_CREATE_USER": True,
    }
    if attr in per_provider:
        return per_provider[attr]
    return import_from_settings(attr, *args)


class OidcBackend(OIDCAuthenticationBackend):
    """Signs in the person a provider vouches for, at the callback of that provider's sign-in."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # The library reads one provider's settings here; ours are per provider, read per sign-in.
        self.UserModel = get_user_model()

    def get_settings(self, attr: str, *args: Any) -> Any:  # type: ignore[override]
        return provider_settings(self.provider, self.metadata, attr, *args)

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> AbstractBaseUser | None:  # type: ignore[override]
        provider = getattr(request, PROVIDER, None) if request is not None else None
        if provider is None or "nonce" not in kwargs:
            return None  # not a callback of ours (a password sign-in, say)
        self.provider = provider
        self.metadata = metadata_of(provider.issuer)
        self.OIDC_OP_TOKEN_ENDPOINT = self.metadata.token_endpoint
        self.OIDC_OP_USER_ENDPOINT = self.metadata.userinfo_endpoint
        self.OIDC_OP_JWKS_ENDPOINT = self.metadata.jwks_uri
        self.OIDC_RP_CLIENT_ID = provider.client_id
        self.OIDC_RP_CLIENT_SECRET = provider.client_secret
        self.OIDC_RP_SIGN_ALGO = self.metadata.algorithm
        self.OIDC_RP_IDP_SIGN_KEY = None
        return super().authenticate(request, **kwargs)

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        """The ID token's claims, once everything OpenID Connect Core §3.1.3.7 asks is checked."""
        if not isinstance(token, str) or not token:
            raise SignInRefused("the provider sent no ID token")
        nonce = kwargs.get("nonce")
        client_id = self.provider.client_id
        try:
            claims = jwt.decode(
                token,
                key=signing_key(self.metadata, token),
                algorithms=[self.metadata.algorithm],
                audience=client_id,
                issuer=self.metadata.issuer,
                leeway=settings.SSO_CLOCK_SKEW_SECONDS,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )
        except jwt.ExpiredSignatureError:
            raise SignInRefused("the provider's token has expired: sign in again") from None
        except jwt.InvalidAudienceError:
            raise SignInRefused("the token was issued for another application") from None
        except jwt.InvalidIssuerError:
            raise SignInRefused("the token was issued by another provider") from None
        except jwt.InvalidSignatureError:
            raise SignInRefused("the token's signature does not verify") from None
        except jwt.InvalidKeyError:
            # signing_key found no published key of the token's key id, even in a fresh key set.
            raise SignInRefused("the token is signed with a key the provider does not publish") from None
        except jwt.PyJWTError as exc:
            raise SignInRefused(f"the token is not valid ({type(exc).__name__})") from None
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != client_id:
            raise SignInRefused("the token was issued for another application")
        token_nonce = claims.get("nonce")
        if not (
            isinstance(nonce, str)
            and isinstance(token_nonce, str)
            and hmac.compare_digest(nonce, token_nonce)
        ):
            raise SignInRefused("the token answers another sign-in (its nonce does not match)")
        return claims

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Any:
        claims = dict(payload)
        if self.metadata.userinfo_endpoint and access_token:
            info = self.get_userinfo(access_token, id_token, payload)
            if not isinstance(info, dict) or info.get("sub") != payload.get("sub"):
                raise SignInRefused("the provider's profile names another person than its token")
            claims.update({k: v for k, v in info.items() if k not in ("iss", "aud", "exp", "iat", "nonce")})
        try:
            return services.sign_in_accept(
                provider=self.provider, claims=claims, address=client_ip(self.request)
            )
        except SignInRefused as exc:
            exc.claims = claims  # type: ignore[attr-defined]  # who was refused, for the record
            raise


class PasswordPolicyBackend:
    """Refuses a correct password where the person's organisation signs in only through its
    provider (the reason shown on the sign-in form) — unless they are an admin there: admins keep
    their password as a break-glass way in, and each use is recorded. It authenticates nobody:
    Django's ``ModelBackend``, after it, does; a refusal (``PermissionDenied``) ends the search.
    Only people of such organisations pay for the password check made here. It has no ``get_user``
    (nor is it a ``BaseBackend``, which has one): no session is ever made with it."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        if username is None or password is None:
            return None
        user = get_user_model()._default_manager.filter(**{get_user_model().USERNAME_FIELD: username}).first()
        if user is None or user.is_superuser or not user.is_active:
            return None
        closed = selectors.password_closed_organization_ids(user=user)
        if not closed or not user.check_password(password):
            return None  # a wrong password is told nothing about single sign-on
        address = client_ip(request) if request is not None else None
        administered = set(
            Membership.objects.filter(user=user, role=Role.ADMIN, organization_id__in=closed).values_list(
                "organization_id", flat=True
            )
        )
        if not closed - administered:
            services.password_sign_in_record(
                user=user, organization_ids=closed, kind=SignInRecord.Kind.BREAK_GLASS, address=address
            )
            return None
        services.password_sign_in_record(
            user=user,
            organization_ids=closed - administered,
            kind=SignInRecord.Kind.PASSWORD_REFUSED,
            address=address,
        )
        names = ", ".join(
            provider.name for provider in selectors.providers_for_sign_in().filter(organization_id__in=closed)
        )
        if request is not None:
            setattr(
                request,
                REFUSAL,
                f"Your organisation signs in through its identity provider: use “Sign in with {names}”.",
            )
        raise PermissionDenied
