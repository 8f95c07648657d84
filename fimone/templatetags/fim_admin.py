"""What the admin's own templates add to Django's: a model's breadcrumbs name the index group it is
listed in ("Organisations & people", then "Organisations"), as the index and its sidebar do,
rather than the Python app that holds it ("Agents and runs")."""

from __future__ import annotations

from typing import Any

from django import template

from fimone.admin_site import group_title

register = template.Library()


@register.filter
def index_group(opts: Any) -> str:
    """The title of the admin index's group that lists the model of ``opts`` (its ``_meta``)."""
    return group_title(opts.app_label, opts.model_name)
