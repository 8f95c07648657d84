"""Channel configurations leave this app's state for the approvals app's (their table stays)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('approvals', '0019_channel_configs_in_approvals'),
        ('channels_im', '0009_organisations_in_tenancy'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='imlinkoffer',
                    name='channel_config',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='link_offers', to='approvals.channelconfig'),
                ),
                migrations.RemoveField(
                    model_name='historicalchannelconfig',
                    name='history_user',
                ),
                migrations.RemoveField(
                    model_name='historicalchannelconfig',
                    name='organization',
                ),
                migrations.DeleteModel(
                    name='ChannelConfig',
                ),
                migrations.DeleteModel(
                    name='HistoricalChannelConfig',
                ),
            ],
        ),
    ]
