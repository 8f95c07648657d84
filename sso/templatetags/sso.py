"""``{% sso_buttons next %}``: the sign-in pages' "Sign in with <provider>" buttons."""

from __future__ import annotations

import logging
from typing import Any

from django import template
from django.db import DatabaseError

from sso.selectors import providers_for_sign_in

register = template.Library()
log = logging.getLogger(__name__)


@register.inclusion_tag("sso/_buttons.html")
def sso_buttons(next_url: str = "") -> dict[str, Any]:
    try:
        providers = list(
            providers_for_sign_in().select_related("organization").only("name", "slug", "organization__name")
        )
    except DatabaseError:
        # The password form must still show (a database not migrated yet, one that hiccups).
        log.warning("the sign-in page shows no identity providers: they could not be read", exc_info=True)
        providers = []
    return {"providers": providers, "next": next_url}
