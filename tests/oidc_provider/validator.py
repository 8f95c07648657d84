"""The test provider's claims: what the relying party under test reads about a user.

DOT 3.4.1 builds both the ID token and the userinfo response from ``get_additional_claims(request)``
(the signature with ``request``: ``request.user`` is the user the token is for), keeping a claim only
when the scope ``oidc_claim_scope`` maps it to was granted. So with the scopes
``openid email profile groups`` both the ID token (no userinfo call needed) and userinfo carry
``email``, ``email_verified``, ``name``, ``preferred_username`` and ``groups``; without ``groups``
in the scope there is no ``groups`` claim anywhere.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from oauth2_provider.oauth2_validators import OAuth2Validator
from oauth2_provider.settings import oauth2_settings

CLAIMS = ("sub", "email", "email_verified", "name", "preferred_username", "groups")


class Validator(OAuth2Validator):
    oidc_claim_scope = {**OAuth2Validator.oidc_claim_scope, "groups": "groups"}

    def get_additional_claims(self, request: Any) -> dict[str, Any]:
        user = request.user
        return {
            "email": user.email,
            "email_verified": True,
            "name": user.get_full_name() or user.get_username(),
            "preferred_username": user.get_username(),
            "groups": sorted(user.groups.values_list("name", flat=True)),
        }

    def get_discovery_claims(self, request: Any) -> list[str]:
        # DOT lists only ``sub`` when get_additional_claims takes the request: name them all.
        return list(CLAIMS)

    def finalize_id_token(
        self, id_token: dict[str, Any], token: Any, token_handler: Any, request: Any
    ) -> str:
        # oauthlib stamps ``iat`` before DOT computes ``exp`` from its own clock: remember ``iat``
        # so that ``exp - iat`` is exactly ID_TOKEN_EXPIRE_SECONDS, never one more across a second.
        request.oidc_provider_iat = id_token.get("iat")
        return super().finalize_id_token(id_token, token, token_handler, request)

    def get_id_token_dictionary(self, token: Any, token_handler: Any, request: Any) -> tuple[dict, datetime]:
        claims, expiration_time = super().get_id_token_dictionary(token, token_handler, request)
        issued_at = getattr(request, "oidc_provider_iat", None)
        if isinstance(issued_at, int):
            claims["exp"] = issued_at + oauth2_settings.ID_TOKEN_EXPIRE_SECONDS
            expiration_time = datetime.fromtimestamp(issued_at, UTC) + timedelta(
                seconds=oauth2_settings.ID_TOKEN_EXPIRE_SECONDS
            )
        return claims, expiration_time
