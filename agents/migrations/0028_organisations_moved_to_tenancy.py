"""The organisation models leave this app's state for the tenancy app's (their tables stay).

Every app whose models point at an organisation points at ``tenancy.Organization`` first
(their migrations run before this one: ``run_before``); nothing changes in the database."""


import django.db.models.deletion
from django.db import migrations, models


MOVED = ("organization", "historicalorganization", "membership", "invitation")


def drop_duplicate_content_types(apps, schema_editor):
    """On a new database the agents app's migrations may have made content types (and
    permissions) for these models while they were still in its state, after the tenancy app had
    its own: the tenancy ones are the ones in use; the agents ones go. One that is alone is
    relabelled, as ``tenancy.0001`` does."""
    content_type = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        old = content_type.objects.filter(app_label="agents", model=model)
        if content_type.objects.filter(app_label="tenancy", model=model).exists():
            old.delete()
        else:
            old.update(app_label="tenancy")


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0027_mcp_listing_to_review'),
        ('tenancy', '0001_initial'),
        ('contenttypes', '0002_remove_content_type_name'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name='invitation',
                    name='accepted_by',
                ),
                migrations.RemoveField(
                    model_name='invitation',
                    name='invited_by',
                ),
                migrations.RemoveField(
                    model_name='invitation',
                    name='invited_user',
                ),
                migrations.RemoveField(
                    model_name='invitation',
                    name='organization',
                ),
                migrations.RemoveField(
                    model_name='membership',
                    name='manager',
                ),
                migrations.RemoveField(
                    model_name='membership',
                    name='organization',
                ),
                migrations.RemoveField(
                    model_name='membership',
                    name='user',
                ),
                migrations.RemoveField(
                    model_name='organization',
                    name='archived_by',
                ),
                migrations.AlterField(
                    model_name='connector',
                    name='organization',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='connectors', to='tenancy.organization', verbose_name='organisation'),
                ),
                migrations.AlterField(
                    model_name='historicalhookdeclaration',
                    name='organization',
                    field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='tenancy.organization', verbose_name='organisation'),
                ),
                migrations.AlterField(
                    model_name='hookdeclaration',
                    name='organization',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='hook_declarations', to='tenancy.organization', verbose_name='organisation'),
                ),
                migrations.AlterField(
                    model_name='conversation',
                    name='organization',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='conversations', to='tenancy.organization', verbose_name='organisation'),
                ),
                migrations.AlterField(
                    model_name='historicalconnector',
                    name='organization',
                    field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='tenancy.organization', verbose_name='organisation'),
                ),
                migrations.AlterField(
                    model_name='historicalagent',
                    name='organization',
                    field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='tenancy.organization', verbose_name='organisation'),
                ),
                migrations.AlterField(
                    model_name='chainreplay',
                    name='organization',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='tenancy.organization', verbose_name='organisation'),
                ),
                migrations.AlterField(
                    model_name='connectorcalllog',
                    name='organization',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='tenancy.organization', verbose_name='organisation'),
                ),
                migrations.AlterField(
                    model_name='agent',
                    name='organization',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='agents', to='tenancy.organization', verbose_name='organisation'),
                ),
                migrations.AlterField(
                    model_name='shadowdecision',
                    name='organization',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='tenancy.organization', verbose_name='organisation'),
                ),
                migrations.DeleteModel(
                    name='HistoricalOrganization',
                ),
                migrations.DeleteModel(
                    name='Invitation',
                ),
                migrations.DeleteModel(
                    name='Membership',
                ),
                migrations.DeleteModel(
                    name='Organization',
                ),
            ],
        ),
        migrations.RunPython(drop_duplicate_content_types, migrations.RunPython.noop),
    ]
