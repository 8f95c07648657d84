"""Writes of single sign-on: an accepted sign-in (the account made or found, its roles made to
follow the provider's groups), refusals, break-glass password sign-ins and sign-outs, each recorded.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from fimone.audit_chain import chain_append
from fimone.errors import ServiceError
from sso.models import ExternalIdentity, IdentityProvider, SignInRecord
from tenancy.models import Membership, Role
from tenancy.roles import membership_remove, membership_set

User = get_user_model()


class SignInRefused(Exception):
    """A sign-in the provider vouched for (or claimed to) that is refused; the message says why in
    words the person can read (it names no secret)."""


def _groups_of(claims: dict[str, Any], claim: str) -> list[str]:
    value = claims.get(claim)
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list | tuple):
        return [str(item) for item in value if isinstance(item, str | int)]
    return []


def check_sign_in(*, provider: IdentityProvider, claims: dict[str, Any]) -> None:
    """Refuse what the provider's claims do not allow: no subject, an e-mail domain the organisation
    does not allow, an e-mail the provider says it has not verified."""
    if not str(claims.get("sub") or ""):
        raise SignInRefused("the provider did not say who you are (no subject)")
    email = str(claims.get("email") or "")
    if provider.domains:
        domain = email.rpartition("@")[2].lower()
        if not email or domain not in provider.domains:
            raise SignInRefused(
                f"{email or 'an account without an e-mail address'} may not sign in to "
                f"{provider.organization}: its e-mail domain is not one it allows"
            )
    if email and claims.get("email_verified") is False:
        raise SignInRefused(f"the provider has not verified {email}")


def _new_username(*, provider: IdentityProvider, email: str, subject: str) -> str:
    if email and not User.objects.filter(username__iexact=email).exists():
        return email[:150]
    digest = hashlib.sha256(f"{provider.pk}:{subject}".encode()).hexdigest()[:10]
    base = (email or provider.slug)[:138]
    return f"{base}-{digest}"


def _account_for(*, provider: IdentityProvider, claims: dict[str, Any]) -> tuple[Any, ExternalIdentity]:
    """The account the provider's subject signs in to: the one linked before; else the one active
    member of the organisation with that (verified) e-mail; else a new account."""
    subject = str(claims["sub"])
    link = (
        ExternalIdentity.objects.select_for_update()
        .select_related("user")
        .filter(provider=provider, subject=subject)
        .first()
    )
    if link is not None:
        return link.user, link
    email = str(claims.get("email") or "")
    user = None
    if email and claims.get("email_verified") is True:
        members = User.objects.filter(
            email__iexact=email, memberships__organization=provider.organization, is_active=True
        ).distinct()
        if len(found := list(members[:2])) == 1:
            user = found[0]
    if user is None:
        # No password: the account signs in through the provider (create_user stores an unusable one).
        user = User.objects.create_user(_new_username(provider=provider, email=email, subject=subject))
    link = ExternalIdentity.objects.create(provider=provider, subject=subject, user=user)
    return user, link


def _record(provider: IdentityProvider, kind: str, *, user: Any = None, **fields: Any) -> None:
    """Append a record to the provider's organisation's audit chain (in the caller's transaction,
    if any: an accepted sign-in and its records commit together)."""
    chain_append(
        SignInRecord(
            organization_id=provider.organization_id, provider=provider, user=user, kind=kind, **fields
        )
    )


def _roles_follow(*, provider: IdentityProvider, user: Any, groups: list[str], address: str | None) -> None:
    """Make ``user``'s roles in the provider's organisation those its groups map to (and member):
    roles no group gives any more are taken away, except the organisation's last admin's."""
    by_group = provider.roles_by_group
    wanted = {Role.MEMBER.value} | {role for group in groups for role in by_group.get(group, ())}
    held = Membership.objects.filter(organization_id=provider.organization_id, user=user).select_related(
        "organization", "user"
    )
    have = set()
    for membership in held:
        if membership.role in wanted:
            have.add(membership.role)
            continue
        try:
            membership_remove(membership=membership)
        except ServiceError as exc:
            have.add(membership.role)
            _record(
                provider,
                SignInRecord.Kind.ROLE_KEPT,
                user=user,
                role=membership.role,
                detail=str(exc),
                address=address,
            )
        else:
            _record(
                provider, SignInRecord.Kind.ROLE_REMOVED, user=user, role=membership.role, address=address
            )
    for role in sorted(wanted - have):
        membership_set(organization=provider.organization, user=user, role=role)
        _record(provider, SignInRecord.Kind.ROLE_GRANTED, user=user, role=role, address=address)


@transaction.atomic
def sign_in_accept(*, provider: IdentityProvider, claims: dict[str, Any], address: str | None = None) -> Any:
    """The account ``claims`` (verified: signature, issuer, audience, nonce, expiry) sign in to,
    its name and e-mail refreshed and its roles in the provider's organisation following the
    groups. Raises :class:`SignInRefused` (nothing written) when the claims are not allowed or the
    account is deactivated."""
    check_sign_in(provider=provider, claims=claims)
    user, link = _account_for(provider=provider, claims=claims)
    if not user.is_active:
        raise SignInRefused("this account is deactivated: ask your organisation's admin")
    email = str(claims.get("email") or "")
    changed = []
    for field, value in (
        ("email", email),
        ("first_name", str(claims.get("given_name") or claims.get("name") or "")[:150]),
        ("last_name", str(claims.get("family_name") or "")[:150]),
    ):
        if value and getattr(user, field) != value:
            setattr(user, field, value)
            changed.append(field)
    if changed:
        user.save(update_fields=changed)
    groups = _groups_of(claims, provider.groups_claim)
    _roles_follow(provider=provider, user=user, groups=groups, address=address)
    link.last_sign_in_at = timezone.now()
    link.save(update_fields=["last_sign_in_at"])
    _record(
        provider,
        SignInRecord.Kind.SIGNED_IN,
        user=user,
        subject=link.subject,
        email=email,
        detail=f"groups: {', '.join(groups) or 'none'}",
        address=address,
    )
    return user


def sign_in_refused(
    *,
    provider: IdentityProvider,
    reason: str,
    claims: dict[str, Any] | None = None,
    address: str | None = None,
) -> None:
    """Record a refused sign-in through ``provider`` (who, as far as known, and why)."""
    claims = claims or {}
    _record(
        provider,
        SignInRecord.Kind.REFUSED,
        subject=str(claims.get("sub") or "")[:255],
        email=str(claims.get("email") or "")[:254],
        detail=reason,
        address=address,
    )


def password_sign_in_record(*, user: Any, organization_ids: set[int], kind: str, address: str | None) -> None:
    """Record a password sign-in to organisations that sign in through their provider: a refusal,
    or an admin's break-glass way in."""
    providers = IdentityProvider.objects.filter(
        organization_id__in=organization_ids, enabled=True, passwords_allowed=False
    )
    seen: set[int] = set()
    for provider in providers:
        if provider.organization_id in seen:
            continue
        seen.add(provider.organization_id)
        _record(provider, kind, user=user, email=user.email, address=address)


def sign_out_record(*, provider: IdentityProvider, user: Any, address: str | None) -> None:
    _record(
        provider, SignInRecord.Kind.SIGNED_OUT, user=user, email=getattr(user, "email", ""), address=address
    )
