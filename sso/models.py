"""An organisation's identity provider, the people it vouches for, and the record of sign-ins.

:class:`IdentityProvider` is configured by the organisation's admins (the client secret encrypted at
rest, never shown again); :class:`ExternalIdentity` ties a provider's subject (``sub``) to one
account, so a person is recognised by the provider's own identifier, never by an e-mail address a
provider of another organisation could also assert; :class:`SignInRecord` is the append-only,
hash-chained account of sign-ins, refusals and the roles the provider granted or took away.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone
from simple_history.models import HistoricalRecords

from fimone.audit_chain import ChainLink, canonical_time, chain_append
from fimone.fields import EncryptedJSONField
from fimone.history import SecretsFingerprint
from tenancy.models import Role, organisation_key

ROLE_LINE = re.compile(r"^\s*(?P<group>[^=#]+?)\s*=\s*(?P<role>[a-z]+)\s*$")


def parse_group_roles(text: str) -> dict[str, set[str]]:
    """``"group = role"`` lines (blank lines and ``#`` comments ignored) as ``{group: {roles}}``.
    Raises ``ValidationError`` naming the first line that is not such a pair or names no role."""
    mapping: dict[str, set[str]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.strip().startswith("#"):
            continue
        match = ROLE_LINE.match(line)
        if match is None:
            raise ValidationError(f'line {number}: write "group = role", e.g. "fim-approvers = approver"')
        role = match["role"]
        if role not in Role.values:
            raise ValidationError(f"line {number}: {role!r} is no role; roles are {', '.join(Role.values)}")
        mapping.setdefault(match["group"], set()).add(role)
    return mapping


class IdentityProvider(models.Model):
    """An OpenID Connect provider whose users sign in to ``organization``.

    ``issuer`` is the provider's issuer identifier; its discovery document
    (``<issuer>/.well-known/openid-configuration``) names the endpoints and keys. Everyone it signs
    in becomes a member; ``group_roles`` maps the groups in the ``groups_claim`` to further roles,
    applied at every sign-in (a group removed at the provider takes the role away at the next one).
    With ``passwords_allowed`` off, the organisation's people sign in only through the provider;
    its admins keep their password as a break-glass way in (recorded as such)."""

    organization = organisation_key(on_delete=models.CASCADE, related_name="identity_providers")
    name = models.CharField(
        max_length=100, help_text="Shown on the sign-in pages: “Sign in with” and this name."
    )
    slug = models.SlugField(
        max_length=50,
        unique=True,
        validators=[RegexValidator(r"^[a-z0-9-]+$", "Lower-case letters, digits and dashes only.")],
        help_text="Part of the sign-in address: /sso/this-slug/start/.",
    )
    issuer = models.URLField(
        max_length=300, help_text="The provider's issuer, e.g. https://login.example.com/realms/acme"
    )
    client_id = models.CharField(max_length=200)
    secrets = EncryptedJSONField(null=True, blank=True)
    scopes = models.CharField(
        max_length=200,
        default="openid email profile",
        help_text="Requested scopes; add the one that carries groups if your provider needs it.",
    )
    groups_claim = models.CharField(max_length=100, default="groups", help_text="The claim listing groups.")
    group_roles = models.TextField(
        blank=True,
        help_text='One "group = role" per line, e.g. "fim-approvers = approver". Everyone signed in is '
        "a member; these groups add roles.",
    )
    allowed_domains = models.CharField(
        max_length=500,
        blank=True,
        help_text="E-mail domains allowed to sign in, separated by spaces or commas (empty: any).",
    )
    passwords_allowed = models.BooleanField(
        default=True,
        help_text="Off: the organisation's people sign in only through this provider; its admins keep "
        "their password as a break-glass way in.",
    )
    enabled = models.BooleanField(default=True)
    from_environment = models.BooleanField(
        default=False, editable=False, help_text="Configured by the server's SSO_* settings, not here."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    history = HistoricalRecords(excluded_fields=["secrets"], bases=[SecretsFingerprint])

    class Meta:
        verbose_name = "identity provider"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors: dict[str, Any] = {}
        try:
            parse_group_roles(self.group_roles)
        except ValidationError as exc:
            errors["group_roles"] = exc.messages
        if self.issuer and not self.issuer.startswith(("https://", "http://")):
            errors["issuer"] = "The issuer is an http(s) URL."
        if self.scopes and "openid" not in self.scopes.split():
            errors["scopes"] = 'The scopes must include "openid".'
        if errors:
            raise ValidationError(errors)

    @property
    def client_secret(self) -> str:
        return str((self.secrets or {}).get("client_secret", ""))

    @property
    def roles_by_group(self) -> dict[str, set[str]]:
        return parse_group_roles(self.group_roles)

    @property
    def domains(self) -> set[str]:
        return {d.lower().lstrip("@") for d in re.split(r"[\s,]+", self.allowed_domains) if d}


class ExternalIdentity(models.Model):
    """The account a provider's subject signs in to (made at their first sign-in)."""

    provider = models.ForeignKey(IdentityProvider, on_delete=models.CASCADE, related_name="identities")
    subject = models.CharField(max_length=255)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    last_sign_in_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "external identity"
        verbose_name_plural = "external identities"
        constraints = [
            models.UniqueConstraint(fields=["provider", "subject"], name="externalidentity_unique_subject")
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.provider}"


def canonical_address(address: str | None) -> str | None:
    """``address`` as one text whatever the database gives back for it (PostgreSQL's ``inet``
    writes an IPv6 address its own way): what a sign-in record's link covers."""
    if not address:
        return None
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return str(address)


class SignInRecord(ChainLink):
    """One sign-in, refusal or role change from a provider; never changed once written.

    A link of its organisation's audit chain (``fimone.audit_chain``), like the confirmation
    events and the connector call log: append-only in the ORM and, on PostgreSQL, by a trigger;
    ``audit_verify`` names a record edited, inserted or deleted behind the platform's back. Every
    insert is an append: a record saved without its place in the chain is given one
    (:meth:`save`), so none exists outside it."""

    class Kind(models.TextChoices):
        SIGNED_IN = "signed_in", "signed in"
        REFUSED = "refused", "sign-in refused"
        ROLE_GRANTED = "role_granted", "role granted by the provider"
        ROLE_REMOVED = "role_removed", "role removed by the provider"
        ROLE_KEPT = "role_kept", "role kept (last admin)"
        BREAK_GLASS = "break_glass", "break-glass password sign-in"
        PASSWORD_REFUSED = "password_refused", "password sign-in refused"
        SIGNED_OUT = "signed_out", "signed out"

    organization = organisation_key(on_delete=models.PROTECT, related_name="+")
    # PROTECT: a record is never rewritten, so what it names is switched off, not deleted
    # (docs/design.md §1.9).
    provider = models.ForeignKey(
        IdentityProvider, on_delete=models.PROTECT, related_name="+", null=True, blank=True
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", null=True, blank=True
    )
    kind = models.CharField(max_length=20, choices=Kind.choices)
    subject = models.CharField(max_length=255, blank=True)
    email = models.CharField(max_length=254, blank=True)
    role = models.CharField(max_length=16, blank=True)
    detail = models.TextField(blank=True)
    address = models.GenericIPAddressField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False, db_index=True)

    class Meta:
        verbose_name = "sign-in record"
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["organization", "-created_at"])]
        constraints = [
            models.UniqueConstraint(fields=["organization", "chain_seq"], name="signinrecord_chain_link"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} — {self.email or self.user or self.subject}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self._state.adding and self.chain_seq is None:
            # Written without a place in the chain (``objects.create``): appended as the next link,
            # which saves it through here again, in position. A stored record is refused below.
            chain_append(self)
            return
        super().save(*args, **kwargs)

    def chain_payload(self) -> dict[str, Any]:
        return {
            "provider": self.provider_id,
            "user": self.user_id,
            "kind": str(self.kind),
            "subject": self.subject,
            "email": self.email,
            "role": self.role,
            "detail": self.detail,
            "address": canonical_address(self.address),
            "created_at": canonical_time(self.created_at),
        }
