"""Upgrading a database across the squashed migrations (fimone/upgrades.py): one that ran the
last release before the squash goes on; one an older release left half way is told what to do,
before anything is changed."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder

from fimone.upgrades import check_no_squash_half_applied

pytestmark = pytest.mark.django_db


def forget(app: str, *names: str) -> None:
    """The database as if an older release had not applied ``names`` of ``app`` yet."""
    MigrationRecorder.Migration.objects.filter(app=app, name__in=names).delete()


def test_a_database_that_applied_every_replaced_migration_goes_on() -> None:
    assert check_no_squash_half_applied(databases=["default"]) == []
    assert ("approvals", "0019_channel_configs_in_approvals") in MigrationRecorder(
        connection
    ).applied_migrations()


def test_it_tells_a_database_an_older_release_left_half_way_to_upgrade_through_the_last_one() -> None:
    forget("approvals", "0018_organisations_in_tenancy", "0019_channel_configs_in_approvals")

    (error,) = check_no_squash_half_applied(databases=["default"])

    assert error.id == "fimone.E001"
    assert (
        "of the 19 approvals migrations that approvals.0001_squashed_0019 replaces, 2 are not applied"
        in error.msg
    )
    assert "(0018_organisations_in_tenancy, 0019_channel_configs_in_approvals)" in error.msg
    assert error.hint.startswith("Upgrade through release 0.1.0 first")


def test_migrate_refuses_such_a_database_before_it_changes_anything() -> None:
    forget("sso", "0004_organisations_in_tenancy")
    applied = MigrationRecorder.Migration.objects.count()

    with pytest.raises(SystemCheckError, match=r"fimone\.E001.*sso\.0001_squashed_0004"):
        call_command("migrate", verbosity=0, interactive=False, skip_checks=False)

    assert MigrationRecorder.Migration.objects.count() == applied


def test_the_checks_of_every_command_leave_such_a_database_alone() -> None:
    forget("sso", "0004_organisations_in_tenancy")

    call_command("check")  # database checks run only for the commands that name a database
