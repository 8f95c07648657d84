"""``manage.py sso_provider_from_env``: make the server-wide provider the ``SSO_*`` settings
describe (``docs/security.md``), or update it; without ``SSO_ISSUER`` it does nothing. Run by
``make prod`` after the migrations. The admin shows that provider read-only."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from sso.models import IdentityProvider
from tenancy.models import Organization


class Command(BaseCommand):
    help = "Create or update the identity provider configured by the SSO_* settings."

    def handle(self, *args: Any, **options: Any) -> None:
        wanted = dict(settings.SSO_FROM_ENV)
        if not wanted:
            self.stdout.write("SSO_ISSUER is not set: no server-wide identity provider.")
            return
        name = wanted.pop("organization")
        organization = Organization.objects.filter(name=name).first()
        if organization is None:
            raise CommandError(f"SSO_ORGANIZATION names no organisation: {name!r} (create it first)")
        secret = wanted.pop("client_secret")
        provider = IdentityProvider.objects.filter(slug=wanted["slug"]).first()
        if provider is not None and not provider.from_environment:
            raise CommandError(f"SSO_SLUG {wanted['slug']!r} is taken by a provider configured in the admin")
        provider = provider or IdentityProvider(slug=wanted["slug"], from_environment=True)
        for field, value in wanted.items():
            setattr(provider, field, value)
        provider.organization = organization
        provider.secrets = {"client_secret": secret}
        try:
            provider.full_clean()
        except ValidationError as exc:
            raise CommandError(f"the SSO_* settings are not valid: {'; '.join(exc.messages)}") from None
        provider.save()
        self.stdout.write(
            f"Identity provider {provider.name!r} ({provider.issuer}) signs people in to {organization}."
        )
