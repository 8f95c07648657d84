"""Foreign keys to an organisation point at ``tenancy.Organization``: the same table, so only
the state changes."""


import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('tenancy', '0001_initial'),
        ('workflows', '0003_organisation_spelling'),
    ]

    # Before the agents app drops the organisation models from its state.
    run_before = [("agents", "0028_organisations_moved_to_tenancy")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='workflow',
                    name='organization',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='workflows', to='tenancy.organization', verbose_name='organisation'),
                ),
                migrations.AlterField(
                    model_name='workflowrun',
                    name='organization',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='tenancy.organization', verbose_name='organisation'),
                ),
            ],
        ),
    ]
