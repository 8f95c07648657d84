"""Foreign keys to an organisation point at ``tenancy.Organization``: the same table, so only
the state changes."""


import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('mcp_gateway', '0002_undelivered_calls_index'),
        ('tenancy', '0001_initial'),
    ]

    # Before the agents app drops the organisation models from its state.
    run_before = [("agents", "0028_organisations_moved_to_tenancy")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='gateway',
                    name='organization',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='mcp_gateways', to='tenancy.organization', verbose_name='organisation'),
                ),
            ],
        ),
    ]
