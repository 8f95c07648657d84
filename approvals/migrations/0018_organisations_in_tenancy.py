"""Foreign keys to an organisation point at ``tenancy.Organization``: the same table, so only
the state changes."""


import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('approvals', '0017_request_trace_context'),
        ('tenancy', '0001_initial'),
    ]

    # Before the agents app drops the organisation models from its state.
    run_before = [("agents", "0028_organisations_moved_to_tenancy")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='absence',
                    name='organization',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='tenancy.organization', verbose_name='organisation'),
                ),
                migrations.AlterField(
                    model_name='approverpolicy',
                    name='organization',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='approver_policies', to='tenancy.organization', verbose_name='organisation'),
                ),
                migrations.AlterField(
                    model_name='confirmationevent',
                    name='organization',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='tenancy.organization', verbose_name='organisation'),
                ),
                migrations.AlterField(
                    model_name='confirmationrequest',
                    name='organization',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='tenancy.organization', verbose_name='organisation'),
                ),
                migrations.AlterField(
                    model_name='historicalapproverpolicy',
                    name='organization',
                    field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='tenancy.organization', verbose_name='organisation'),
                ),
                migrations.AlterField(
                    model_name='standinggrant',
                    name='organization',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='tenancy.organization', verbose_name='organisation'),
                ),
            ],
        ),
    ]
