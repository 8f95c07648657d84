"""The callback path's hand-written reads (fimone/rows.py) give the objects a queryset would: the
same values, converted the same way, on either database."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.forms.models import model_to_dict

from approvals.models import ChannelConfig
from channels_im.identities import identity_for_click
from channels_im.models import ImIdentity
from channels_im.selectors import channel_config_for_callback
from fimone import rows
from tenancy.models import Membership, Organization, Role

pytestmark = pytest.mark.django_db


def every_field(instance: Any) -> dict[str, Any]:
    return {field.attname: getattr(instance, field.attname) for field in type(instance)._meta.concrete_fields}


def test_a_clickers_identity_and_user_read_by_hand_equal_what_the_orm_reads(personas: Any) -> None:
    config = ChannelConfig.objects.create(organization=personas.org, kind="slack", name="Slack")
    ImIdentity.objects.create(
        organization=personas.org, user=personas.approver, provider="slack", external_id="U0APRIL"
    )
    by_the_orm = ImIdentity.objects.select_related("user").get(external_id="U0APRIL")

    by_hand = identity_for_click(config=config, external_id="U0APRIL")

    assert by_hand is not None
    assert every_field(by_hand) == every_field(by_the_orm)
    assert every_field(by_hand.user) == every_field(by_the_orm.user)
    assert by_hand.user.is_active is True  # a boolean, not SQLite's 1
    assert by_hand.user.date_joined.tzinfo is not None


def test_a_channel_read_by_its_callback_key_has_its_secrets_decrypted_and_only_if_active(
    personas: Any,
) -> None:
    config = ChannelConfig.objects.create(
        organization=personas.org, kind="slack", name="Slack", secrets={"signing_secret": "s3cret"}
    )

    found = channel_config_for_callback(config.callback_key)

    assert found is not None and found.secrets == {"signing_secret": "s3cret"}
    assert model_to_dict(found) == model_to_dict(ChannelConfig.objects.get(pk=config.pk))
    ChannelConfig.objects.filter(pk=config.pk).update(active=False)
    assert channel_config_for_callback(config.callback_key) is None
    assert channel_config_for_callback("no-such-key") is None


def test_a_compiled_queryset_runs_with_other_values_what_the_orm_runs(personas: Any) -> None:
    compiled = rows.Compiled.of(
        lambda organization_id, role: (
            Membership.objects.filter(organization_id=organization_id, role=role)
            .order_by("user__username")
            .values_list("user__username", flat=True)
        ),
        organization_id=int,
        role=str,
    )

    with connection.cursor() as cursor:
        cursor.execute(compiled.sql, compiled.bind(organization_id=personas.org.pk, role=Role.MEMBER))
        by_hand = [name for (name,) in cursor.fetchall()]

    assert by_hand == ["alice"]
    assert by_hand == list(
        Membership.objects.filter(organization=personas.org, role=Role.MEMBER).values_list(
            "user__username", flat=True
        )
    )


def test_a_value_the_orm_changes_on_its_way_cannot_be_compiled() -> None:
    """``icontains`` sends ``%value%``: binding the value itself would read something else."""
    with pytest.raises(ValueError, match="not parameters of the compiled query: name"):
        rows.Compiled.of(lambda name: Organization.objects.filter(name__icontains=name), name=str)
