"""Errors in the admin read in plain language, on the field they belong to, once (issue 23,
"Operator": "Errors are database names … or doubled … shown at the top instead of on the field")."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib import admin

from agents.admin.scoping import ReadOnlyAdminMixin
from agents.models import Connector, ConnectorAction
from approvals.models import ApproverPolicy
from fimone.admin_errors import CONSTRAINT_MESSAGES, constraint_keys
from tenancy.models import Organization
from tests.admin_kit import logged_in, page_text, url
from tests.approvals.kit import policy_form
from tests.personas import make_action, make_http_connector

pytestmark = pytest.mark.django_db


def form_data(response: Any) -> dict[str, Any]:
    """What the admin page ``response`` would post back untouched: its form and every inline row,
    each field as its input holds it."""
    forms = [response.context["adminform"].form]
    data: dict[str, Any] = {}
    for inline in response.context["inline_admin_formsets"]:
        formset = inline.formset
        forms.append(formset.management_form)
        forms.extend(formset.forms)
    for form in forms:
        for name in form.fields:
            value = form[name].value()
            key = form.add_prefix(name)
            if value is None or value is False:
                continue
            if value is True:
                data[key] = "on"
            elif isinstance(value, list | tuple):
                data[key] = [str(v) for v in value]
            else:
                data[key] = str(value)
    return data


def errors_of(response: Any) -> dict[str, list[str]]:
    return {name: list(errors) for name, errors in response.context["adminform"].form.errors.items()}


def test_every_constraint_of_a_model_the_admin_edits_has_a_sentence() -> None:
    edited: set[type] = set()
    for model, model_admin in admin.site._registry.items():
        if isinstance(model_admin, ReadOnlyAdminMixin):
            continue
        edited.add(model)
        edited.update(i.model for i in model_admin.inlines if not issubclass(i, ReadOnlyAdminMixin))
    missing = {
        f"{model._meta.label}: {key}"
        for model in edited
        if model._meta.app_label in {"agents", "approvals", "channels_im", "workflows", "evals", "hooks"}
        for key in constraint_keys(model)
        if key not in CONSTRAINT_MESSAGES
        and model._meta.label not in {"agents.Invitation"}  # its token is made by the service
    }
    assert not missing, missing


def test_a_quorum_of_zero_reads_in_words_on_its_field(governed) -> None:
    policy = ApproverPolicy.objects.create(organization=governed.org)

    response = logged_in(governed.admin).post(
        url(ApproverPolicy, "change", policy.pk), policy_form(policy, approvals_required="0")
    )

    assert response.status_code == 200
    assert errors_of(response) == {"approvals_required": ["Approvals required: at least 1."]}
    assert "approverpolicy_quorum_min" not in page_text(response)


def test_a_timeout_under_ten_seconds_says_so_on_the_timeout_field(governed) -> None:
    policy = ApproverPolicy.objects.create(organization=governed.org)

    response = logged_in(governed.admin).post(
        url(ApproverPolicy, "change", policy.pk), policy_form(policy, timeout_seconds="5")
    )

    errors = errors_of(response)
    assert list(errors) == ["timeout_seconds"], errors
    assert len(errors["timeout_seconds"]) == 1 and "10" in errors["timeout_seconds"][0]
    assert "approverpolicy_timeout_min" not in page_text(response)


def test_a_second_default_policy_is_refused_on_the_agent_field_in_words(governed) -> None:
    ApproverPolicy.objects.create(organization=governed.org)

    response = logged_in(governed.admin).post(
        url(ApproverPolicy, "add"), policy_form(ApproverPolicy(organization=governed.org))
    )

    assert response.status_code == 200
    assert errors_of(response) == {
        "agent": [
            "This organisation already has a default policy (the one without an agent): edit that "
            "one, or choose the agent this policy is for."
        ]
    }
    assert "approverpolicy_one_default_per_org" not in page_text(response)
    assert ApproverPolicy.objects.count() == 1


def test_a_duplicate_action_name_is_refused_on_the_rows_name_field_not_with_an_error_page(governed) -> None:
    connector = make_http_connector(governed.org, "https://erp.example.test", slug="erp")
    make_action(connector, "purchase_pay", method="POST")
    client = logged_in(governed.operator)
    page = client.get(url(Connector, "change", connector.pk))
    data = form_data(page)
    data.update(
        {
            "actions-TOTAL_FORMS": "2",
            "actions-1-name": "purchase_pay",
            "actions-1-method": "GET",
            "actions-1-parameters_schema": "{}",
            "actions-1-context_fields": "[]",
        }
    )

    response = client.post(url(Connector, "change", connector.pk), data)

    assert response.status_code == 200, response.status_code
    row_errors = response.context["inline_admin_formsets"][0].formset.forms[1].errors
    assert row_errors == {"name": ["An action with this name already exists for this connector."]}
    assert "action_unique_name" not in page_text(response)
    assert ConnectorAction.objects.filter(connector=connector).count() == 1


def test_a_taken_connector_slug_and_organisation_name_read_in_words(superuser, governed) -> None:
    make_http_connector(governed.org, "https://erp.example.test", slug="erp")
    other = make_http_connector(governed.org, "https://crm.example.test", slug="crm")
    client = logged_in(superuser)
    data = form_data(client.get(url(Connector, "change", other.pk)))
    data["slug"] = "erp"

    response = client.post(url(Connector, "change", other.pk), data)

    assert errors_of(response) == {
        "slug": ["A connector with this slug already exists in this organisation."]
    }

    org_page = client.get(url(Organization, "change", governed.org.pk))
    data = form_data(org_page)
    data["name"] = governed.other_org.name

    response = client.post(url(Organization, "change", governed.org.pk), data)

    assert errors_of(response) == {"name": ["An organisation with this name already exists."]}
