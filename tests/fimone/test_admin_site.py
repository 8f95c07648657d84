"""The admin index groups models by what people do, and lists beside them the pages the apps
registered with the site (fimone/admin_site.py): the approval history leads the Audit group for
those who may read it."""

from __future__ import annotations

import pytest

from tests.admin_kit import logged_in

pytestmark = pytest.mark.django_db


def audit_group(user) -> list[dict]:
    response = logged_in(user).get("/admin/")
    assert response.status_code == 200
    return next((app["models"] for app in response.context["app_list"] if app["app_label"] == "audit"), [])


def test_the_approval_history_leads_the_audit_group_for_an_auditor(governed) -> None:
    first = audit_group(governed.auditor)[0]

    assert first["object_name"] == "ApprovalHistory"
    assert first["admin_url"] == "/approvals/history/"


def test_the_models_of_the_audit_group_follow_in_their_listed_order(governed) -> None:
    names = [model["object_name"] for model in audit_group(governed.auditor)[1:]]

    order = [
        "Run",
        "ToolExecution",
        "ConnectorCallLog",
        "ShadowDecision",
        "Conversation",
        "GatewayCall",
        "SignInRecord",
    ]
    assert names == sorted(names, key=order.index)
