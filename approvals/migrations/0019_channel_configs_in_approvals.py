"""Channel configurations are declared in this app from now on (where a request's cards go is part
of approving it); their table stays where the channel app made it (``channels_im_channelconfig``).
Only the state changes, and the content types (with their permissions and admin log entries) are
relabelled ``approvals``."""

import agents.models.bound_secrets
import approvals.models.channel_configs
import django.db.models.deletion
import fimone.fields
import simple_history.models
from django.conf import settings
from django.db import migrations, models


MOVED = ("channelconfig", "historicalchannelconfig")


def relabel_content_types(apps, schema_editor):
    content_type = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        old = content_type.objects.filter(app_label="channels_im", model=model)
        if content_type.objects.filter(app_label="approvals", model=model).exists():
            old.delete()  # a new database: made while the model was in both states
        else:
            old.update(app_label="approvals")


def relabel_back(apps, schema_editor):
    content_type = apps.get_model("contenttypes", "ContentType")
    content_type.objects.filter(app_label="approvals", model__in=MOVED).update(app_label="channels_im")


class Migration(migrations.Migration):

    dependencies = [
        ('approvals', '0018_organisations_in_tenancy'),
        ('contenttypes', '0002_remove_content_type_name'),
        ('tenancy', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='ChannelConfig',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(choices=[('web', 'Web inbox'), ('feishu', 'Feishu / Lark'), ('slack', 'Slack'), ('wecom', 'WeCom (企业微信)'), ('email', 'E-mail')], max_length=12)),
                        ('name', models.CharField(max_length=200)),
                        ('active', models.BooleanField(default=True)),
                        ('is_default', models.BooleanField(default=False, help_text="The organisation's default approval channel.")),
                        ('secrets', fimone.fields.EncryptedJSONField(blank=True, null=True)),
                        ('settings_json', models.JSONField(blank=True, default=dict, help_text='Provider settings: Feishu chat_id / domain, Slack channel / api_url, WeCom corp_id / agent_id / touser (or toparty, totag) / api_base.')),
                        ('callback_key', models.CharField(default=approvals.models.channel_configs.new_callback_key, editable=False, help_text='Part of the callback URL.', max_length=64, unique=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('organization', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='channel_configs', to='tenancy.organization', verbose_name='organisation')),
                    ],
                    options={
                        'db_table': 'channels_im_channelconfig',
                    },
                    bases=(agents.models.bound_secrets.SecretsBoundToAddress, models.Model),
                ),
                migrations.AlterField(
                    model_name='approverpolicy',
                    name='channel_config',
                    field=models.ForeignKey(blank=True, help_text='Where cards are sent. Empty: the organisation default, else the web inbox.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='approvals.channelconfig', verbose_name='channel'),
                ),
                migrations.AlterField(
                    model_name='confirmationrequest',
                    name='channel_config',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='approvals.channelconfig'),
                ),
                migrations.AlterField(
                    model_name='escalationtier',
                    name='channel_config',
                    field=models.ForeignKey(blank=True, help_text="Where this tier's card goes. Empty: the channel the request was sent on.", null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='approvals.channelconfig', verbose_name='channel'),
                ),
                migrations.AlterField(
                    model_name='historicalapproverpolicy',
                    name='channel_config',
                    field=models.ForeignKey(blank=True, db_constraint=False, help_text='Where cards are sent. Empty: the organisation default, else the web inbox.', null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='approvals.channelconfig', verbose_name='channel'),
                ),
                migrations.CreateModel(
                    name='HistoricalChannelConfig',
                    fields=[
                        ('id', models.BigIntegerField(auto_created=True, blank=True, db_index=True, verbose_name='ID')),
                        ('secrets_fingerprint', models.CharField(blank=True, editable=False, max_length=32)),
                        ('kind', models.CharField(choices=[('web', 'Web inbox'), ('feishu', 'Feishu / Lark'), ('slack', 'Slack'), ('wecom', 'WeCom (企业微信)'), ('email', 'E-mail')], max_length=12)),
                        ('name', models.CharField(max_length=200)),
                        ('active', models.BooleanField(default=True)),
                        ('is_default', models.BooleanField(default=False, help_text="The organisation's default approval channel.")),
                        ('settings_json', models.JSONField(blank=True, default=dict, help_text='Provider settings: Feishu chat_id / domain, Slack channel / api_url, WeCom corp_id / agent_id / touser (or toparty, totag) / api_base.')),
                        ('created_at', models.DateTimeField(blank=True, editable=False)),
                        ('history_id', models.AutoField(primary_key=True, serialize=False)),
                        ('history_date', models.DateTimeField(db_index=True)),
                        ('history_change_reason', models.CharField(max_length=100, null=True)),
                        ('history_type', models.CharField(choices=[('+', 'Created'), ('~', 'Changed'), ('-', 'Deleted')], max_length=1)),
                        ('history_user', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('organization', models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='tenancy.organization', verbose_name='organisation')),
                    ],
                    options={
                        'verbose_name': 'historical channel config',
                        'verbose_name_plural': 'historical channel configs',
                        'db_table': 'channels_im_historicalchannelconfig',
                        'ordering': ('-history_date', '-history_id'),
                        'get_latest_by': ('history_date', 'history_id'),
                    },
                    bases=(simple_history.models.HistoricalChanges, models.Model),
                ),
                migrations.AddConstraint(
                    model_name='channelconfig',
                    constraint=models.UniqueConstraint(condition=models.Q(('is_default', True)), fields=('organization',), name='channelconfig_one_default'),
                ),
            ],
        ),
        migrations.RunPython(relabel_content_types, relabel_back),
    ]
