"""Who a clicker is: IM identities of an organisation, and the flow that links them.

A click counts only through an :class:`ImIdentity` of the organisation of the channel it came
through (docs/design.md §1.11). Only the person themselves links an identity to their account: a verified
click by someone nobody is linked to is answered, to the clicker only, with a one-time link URL
(:func:`link_offer_make`); opening it signed in and confirming (:func:`im_identity_link`) links
the clicker's IM user id to the signed-in user if they are an active member of the channel's
organisation. Superusers may also link identities directly in the admin.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import uuid
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connections, transaction
from django.urls import reverse
from django.utils import timezone
from psycopg import AsyncConnection

from approvals import decision_sql
from approvals.decision_sql import ClickFacts
from approvals.models import ChannelConfig
from channels_im.models import ImIdentity, ImLinkOffer
from fimone import adb, rows
from fimone.onetime import LinkKind, LinkRefused, new_token
from tenancy.models import Membership

log = logging.getLogger(__name__)

LINK_OFFER_TTL = dt.timedelta(minutes=15)
"""How long a link URL works after the click that asked for it."""
OFFER_LINKS = LinkKind(
    used_at="used_at",
    used_by="used_by",
    unknown="This link is not valid. Click the card again to get a new one.",
    used="This link was already used. Click the card again to get a new one.",
    expired="This link has expired. Click the card again to get a new one.",
)
"""Link offers as one-time links: how they are opened and spent, and refused in the clicker's words."""


def identity_for_click(*, config: ChannelConfig, external_id: str) -> ImIdentity | None:
    """The identity a click through ``config`` counts as: only one of the channel's organisation.
    Its user comes with it, every field loaded. One hand-written statement (:mod:`fimone.rows`):
    every verified click asks this."""
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(_identity_sql(), [config.organization_id, config.kind, external_id])
        row = cursor.fetchone()
    return None if row is None else _identity_of(row)


async def clicker_and_facts_async(
    db: AsyncConnection, *, config: ChannelConfig, external_id: str, request_id: uuid.UUID
) -> tuple[ImIdentity | None, ClickFacts | None]:
    """The identity a click through ``config`` maps to (as :func:`identity_for_click`) and, when
    it maps to one, the clicked request's facts with that user's standing on it (as
    ``approvals.decision_sql.facts_sql``), in one statement on the event loop. The facts are
    ``None`` when there is no such request in the channel's organisation."""
    row = await adb.fetchone(
        db,
        _clicker_and_facts_sql(),
        {
            "organization": config.organization_id,
            "provider": config.kind,
            "external": external_id,
            "request": request_id,
        },
    )
    if row is None:
        return None, None
    width = len(rows.all_fields(ImIdentity)) + len(rows.all_fields(get_user_model()))
    identity, facts = _identity_of(row[:width]), row[width:]
    return identity, (None if facts[0] is None else decision_sql.facts_from_row(facts))


@functools.cache  # our table and column names: the text never changes
def _clicker_and_facts_sql() -> str:
    clicker = _identity_sql().replace(
        "i.organization_id = %s AND i.provider = %s AND i.external_id = %s",
        "i.organization_id = %(organization)s AND i.provider = %(provider)s AND i.external_id = %(external)s",
    )
    user_id = connections[DEFAULT_DB_ALIAS].ops.quote_name(ImIdentity._meta.get_field("user").column)
    facts = decision_sql.facts_sql(user=f"clicker.{user_id}")
    return (
        f"WITH clicker AS ({clicker}) "  # noqa: S608 - our names only
        f"SELECT clicker.*, facts.* FROM clicker LEFT JOIN LATERAL ({facts}) facts ON TRUE"
    )


def _identity_of(row: tuple[Any, ...]) -> ImIdentity:
    user_model = get_user_model()
    identity_fields, user_fields = rows.all_fields(ImIdentity), rows.all_fields(user_model)
    take = rows.taker(row)
    identity = rows.instance(ImIdentity, identity_fields, take(len(identity_fields)))
    identity.user = rows.instance(user_model, user_fields, take(len(user_fields)))
    return identity


@functools.cache  # our table and column names: the text never changes
def _identity_sql() -> str:
    user_model = get_user_model()
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
    return (
        f"SELECT {rows.columns(ImIdentity, 'i', rows.all_fields(ImIdentity))}, "  # noqa: S608 - our names
        f"{rows.columns(user_model, 'u', rows.all_fields(user_model))} "
        f"FROM {quote(ImIdentity._meta.db_table)} i JOIN {quote(user_model._meta.db_table)} u "
        "ON u.id = i.user_id WHERE i.organization_id = %s AND i.provider = %s AND i.external_id = %s"
    )


def link_url(token: str) -> str:
    return settings.SITE_URL + reverse("im-link", args=[token])


@transaction.atomic
def link_offer_make(*, config: ChannelConfig, external_id: str, display_name: str = "") -> str:
    """A new one-time link URL for the verified clicker ``external_id`` of ``config``. It replaces
    the clicker's earlier unused offer on this channel, so clicks never pile offers up."""
    ImLinkOffer.objects.filter(channel_config=config, external_id=external_id, used_at__isnull=True).delete()
    token, digest = new_token()
    ImLinkOffer.objects.create(
        token_sha256=digest,
        organization_id=config.organization_id,
        channel_config=config,
        provider=config.kind,
        external_id=external_id,
        display_name=(display_name or "")[:200],
        expires_at=timezone.now() + LINK_OFFER_TTL,
    )
    return link_url(token)


def link_offer_check(*, token: str, user: Any) -> ImLinkOffer:
    """The offer behind ``token`` if ``user`` may complete it now; else :class:`LinkRefused`
    (404 unknown or forged, 410 used or expired, 403 not an active member of its organisation)."""
    offer = OFFER_LINKS.open(ImLinkOffer.objects.select_related("organization", "channel_config"), token)
    if (
        not getattr(user, "is_active", False)
        or not Membership.objects.filter(user_id=user.pk, organization_id=offer.organization_id).exists()
    ):
        raise LinkRefused("This link is for members of another organisation than yours.", status=403)
    return offer


@transaction.atomic
def im_identity_link(*, token: str, user: Any) -> ImIdentity:
    """Complete the offer behind ``token`` for the signed-in ``user``: link its IM user id to them
    in its organisation. Single use: the offer is spent by a conditional update, so two
    confirmations of one link make one identity. Raises :class:`LinkRefused`."""
    offer = link_offer_check(token=token, user=user)
    now = OFFER_LINKS.spend(offer, user=user)
    try:
        with transaction.atomic():
            identity = ImIdentity.objects.create(
                organization_id=offer.organization_id,
                user=user,
                provider=offer.provider,
                external_id=offer.external_id,
                display_name=offer.display_name,
                linked_by=user,
                linked_at=now,
            )
    except IntegrityError:
        raise LinkRefused(
            "This chat account is already linked to an account of this organisation: ask an "
            "administrator to unlink it first.",
            status=409,
        ) from None
    log.info(
        "IM identity linked by its owner: %s:%s -> user %s in organisation %s (channel %s)",
        offer.provider,
        offer.external_id,
        user.pk,
        offer.organization_id,
        offer.channel_config_id,
    )
    return identity
