"""Foreign keys to an organisation point at ``tenancy.Organization``: the same table, so only
the state changes."""


import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('channels_im', '0008_email_channel'),
        ('tenancy', '0001_initial'),
    ]

    # Before the agents app drops the organisation models from its state.
    run_before = [("agents", "0028_organisations_moved_to_tenancy")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='channelconfig',
                    name='organization',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='channel_configs', to='tenancy.organization', verbose_name='organisation'),
                ),
                migrations.AlterField(
                    model_name='historicalchannelconfig',
                    name='organization',
                    field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='tenancy.organization', verbose_name='organisation'),
                ),
                migrations.AlterField(
                    model_name='imidentity',
                    name='organization',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='im_identities', to='tenancy.organization', verbose_name='organisation'),
                ),
                migrations.AlterField(
                    model_name='imlinkoffer',
                    name='organization',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='tenancy.organization', verbose_name='organisation'),
                ),
            ],
        ),
    ]
