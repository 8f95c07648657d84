"""Upgrading an existing database across squashed migrations.

Each app's history is squashed into one migration that ``replaces`` the ones it was built from;
those are no longer shipped. A database that applied all of them (it ran the release before the
squash) is up to date; a new one runs the squashed migration. A database that applied only some
of them was last migrated by an older release and cannot be carried forward from here: Django
would fail on the missing migrations with an error that names none of this. This check, run by
``migrate`` before it touches anything, says what to do instead.
"""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.db import connections
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

#: The last release that ships the migrations the squashed ones replace.
LAST_UNSQUASHED = "0.1.0"

HINT = (
    f"Upgrade through release {LAST_UNSQUASHED} first (install it, run `manage.py migrate`), "
    "then install this release and migrate again. Nothing was changed."
)


def check_no_squash_half_applied(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list:
    """An error per squashed migration that ``databases`` applied part of: such a database was
    migrated by a release older than the squash and must first run the last release that ships
    the replaced migrations (:data:`LAST_UNSQUASHED`). Registered in ``FimOneConfig.ready()``."""
    errors = []
    squashes = [
        migration
        for migration in MigrationLoader(None, ignore_no_migrations=True).disk_migrations.values()
        if migration.replaces
    ]
    for alias in databases or ():
        recorder = MigrationRecorder(connections[alias])
        if not recorder.has_table():
            continue
        applied = set(recorder.applied_migrations())
        for squash in squashes:
            done = [key for key in squash.replaces if key in applied]
            if done and len(done) < len(squash.replaces):
                missing = [name for app, name in squash.replaces if (app, name) not in applied]
                errors.append(
                    checks.Error(
                        f"The database {alias!r} was last migrated by a release older than this one: "
                        f"of the {len(squash.replaces)} {squash.app_label} migrations that "
                        f"{squash.app_label}.{squash.name} replaces, {len(missing)} are not applied "
                        f"({', '.join(missing[:3])}{', …' if len(missing) > 3 else ''}).",
                        hint=HINT,
                        id="fimone.E001",
                    )
                )
    return errors
