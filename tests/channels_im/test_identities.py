"""The identity services on their own: a click counts only through an identity of the channel's
organisation, and a link is spent once even when confirmed twice at the same moment."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from approvals.models import ChannelConfig
from channels_im.identities import LinkRefused, identity_for_click, im_identity_link, link_offer_make
from channels_im.models import ImIdentity, ImLinkOffer

pytestmark = pytest.mark.django_db(transaction=True)


def slack_config(org: Any, name: str = "Slack") -> ChannelConfig:
    return ChannelConfig.objects.create(organization=org, kind="slack", name=name)


def test_it_ignores_an_identity_of_another_organisation_for_the_same_chat_id(personas) -> None:
    acme, globex = slack_config(personas.org), slack_config(personas.other_org)
    ImIdentity.objects.create(
        organization=personas.other_org, user=personas.stranger, provider="slack", external_id="U0X"
    )

    assert identity_for_click(config=acme, external_id="U0X") is None
    assert identity_for_click(config=globex, external_id="U0X").user == personas.stranger


def _confirm_at_once(token: str, users: list[Any]) -> list[Any]:
    barrier = threading.Barrier(len(users))
    outcomes: list[Any] = []

    def confirm(user: Any) -> None:
        try:
            barrier.wait(5)
            outcomes.append(im_identity_link(token=token, user=user))
        except LinkRefused as refused:
            outcomes.append(refused.status)
        finally:
            connection.close()

    threads = [threading.Thread(target=confirm, args=(user,)) for user in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    return outcomes


@pytest.mark.postgres
def test_two_confirmations_of_one_link_at_once_make_one_identity_on_postgresql(personas) -> None:
    url = link_offer_make(config=slack_config(personas.org), external_id="U0RACE")
    token = url.rstrip("/").rsplit("/", 1)[1]

    outcomes = _confirm_at_once(token, [personas.admin, personas.approver])

    identities = [o for o in outcomes if isinstance(o, ImIdentity)]
    assert len(identities) == 1 and sorted(o for o in outcomes if isinstance(o, int)) == [410]
    assert ImIdentity.objects.filter(external_id="U0RACE").count() == 1
    assert ImLinkOffer.objects.get().used_by == identities[0].user
