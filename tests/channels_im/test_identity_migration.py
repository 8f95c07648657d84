"""Existing IM identities get an organisation when the schema gains one (#9 item 2): kept where
that is unambiguous, removed (to be relinked by their owner) where another organisation's staff
may have mapped them."""

from __future__ import annotations

import pytest

from tests.migration_kit import migrate
from tests.migration_kit import schema_back_to_the_latest as schema_back_to_the_latest

# A data migration's logic is the same on either database; it runs where deployments upgrade
# (PostgreSQL), once, rather than again on the embedded default, where each of these tests costs
# seconds of migrating the whole graph back and forth.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

BEFORE = [("channels_im", "0001_initial")]
AFTER = [("channels_im", "0002_im_identity_per_organization_and_link_offers")]


def test_it_keeps_only_identities_whose_user_belongs_to_exactly_one_organisation() -> None:
    apps = migrate(BEFORE)
    User = apps.get_model("auth", "User")
    Organization = apps.get_model("agents", "Organization")
    Membership = apps.get_model("agents", "Membership")
    ImIdentity = apps.get_model("channels_im", "ImIdentity")
    acme, globex = Organization.objects.create(name="Acme"), Organization.objects.create(name="Globex")
    april, both, nobody = (User.objects.create(username=name) for name in ("april", "both", "nobody"))
    Membership.objects.create(organization=acme, user=april, role="approver")
    Membership.objects.create(organization=acme, user=april, role="admin")  # two roles, one org
    Membership.objects.create(organization=acme, user=both, role="approver")
    Membership.objects.create(organization=globex, user=both, role="member")
    for user, external_id in ((april, "U0APRIL"), (both, "U0BOTH"), (nobody, "U0NOBODY")):
        ImIdentity.objects.create(user=user, provider="slack", external_id=external_id)

    apps = migrate(AFTER)

    rows = apps.get_model("channels_im", "ImIdentity").objects.values_list(
        "external_id", "organization__name"
    )
    assert list(rows) == [("U0APRIL", "Acme")]
