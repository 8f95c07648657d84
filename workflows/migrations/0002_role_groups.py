from django.db import migrations


def sync_role_groups(apps, schema_editor):
    """Operators define and start workflows and evals; auditors read them."""
    from tenancy.roles import role_groups_sync

    role_groups_sync(apps=apps)


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0001_initial"),
        ("evals", "0001_initial"),
    ]

    operations = [migrations.RunPython(sync_role_groups, migrations.RunPython.noop)]
