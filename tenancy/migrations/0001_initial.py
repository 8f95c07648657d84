"""Organisations, memberships and invitations, declared in this app from now on.

Their tables stay where the agents app made them (``agents_organization``, ...): this migration
takes the models into this app's state and changes nothing in the database, except that their
content types (and with them permissions and admin log entries) are relabelled ``tenancy``.
No dependency on the agents app: on a new database these states exist before the tables the
agents app creates for them; ``agents.0028`` drops them from its own state after this.
"""


import django.db.models.deletion
import simple_history.models
from django.conf import settings
from django.db import migrations, models


MOVED = ("organization", "historicalorganization", "membership", "invitation")


def relabel_content_types(apps, schema_editor):
    content_type = apps.get_model("contenttypes", "ContentType")
    content_type.objects.filter(app_label="agents", model__in=MOVED).update(app_label="tenancy")


def relabel_back(apps, schema_editor):
    content_type = apps.get_model("contenttypes", "ContentType")
    content_type.objects.filter(app_label="tenancy", model__in=MOVED).update(app_label="agents")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ('contenttypes', '0002_remove_content_type_name'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='HistoricalOrganization',
                    fields=[
                        ('id', models.BigIntegerField(auto_created=True, blank=True, db_index=True, verbose_name='ID')),
                        ('name', models.CharField(db_index=True, max_length=200)),
                        ('read_only', models.BooleanField(default=False, help_text='When set, agents of this organisation may not run write actions.')),
                        ('created_at', models.DateTimeField(blank=True, editable=False)),
                        ('archived_at', models.DateTimeField(blank=True, help_text='Archived organisations keep their history; their agents cannot run.', null=True)),
                        ('history_id', models.AutoField(primary_key=True, serialize=False)),
                        ('history_date', models.DateTimeField(db_index=True)),
                        ('history_change_reason', models.CharField(max_length=100, null=True)),
                        ('history_type', models.CharField(choices=[('+', 'Created'), ('~', 'Changed'), ('-', 'Deleted')], max_length=1)),
                        ('archived_by', models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('history_user', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'verbose_name': 'historical organisation',
                        'verbose_name_plural': 'historical organisations',
                        'db_table': 'agents_historicalorganization',
                        'ordering': ('-history_date', '-history_id'),
                        'get_latest_by': ('history_date', 'history_id'),
                    },
                    bases=(simple_history.models.HistoricalChanges, models.Model),
                ),
                migrations.CreateModel(
                    name='Organization',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=200, unique=True)),
                        ('read_only', models.BooleanField(default=False, help_text='When set, agents of this organisation may not run write actions.')),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('archived_at', models.DateTimeField(blank=True, help_text='Archived organisations keep their history; their agents cannot run.', null=True)),
                        ('archived_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'verbose_name': 'organisation',
                        'verbose_name_plural': 'organisations',
                        'db_table': 'agents_organization',
                    },
                ),
                migrations.CreateModel(
                    name='Invitation',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('email', models.EmailField(blank=True, help_text='Accepted by the signed-in user with this address.', max_length=254)),
                        ('role', models.CharField(choices=[('member', 'Member'), ('operator', 'Operator'), ('approver', 'Approver'), ('auditor', 'Auditor'), ('admin', 'Admin')], default='member', max_length=16)),
                        ('token_sha256', models.CharField(editable=False, max_length=64, unique=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('expires_at', models.DateTimeField(editable=False)),
                        ('accepted_at', models.DateTimeField(blank=True, editable=False, null=True)),
                        ('accepted_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('invited_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('invited_user', models.ForeignKey(blank=True, help_text='The user invited; or leave empty and give their e-mail address.', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='invitations', to=settings.AUTH_USER_MODEL)),
                        ('organization', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='invitations', to='tenancy.organization', verbose_name='organisation')),
                    ],
                    options={
                        'db_table': 'agents_invitation',
                    },
                ),
                migrations.CreateModel(
                    name='Membership',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('role', models.CharField(choices=[('member', 'Member'), ('operator', 'Operator'), ('approver', 'Approver'), ('auditor', 'Auditor'), ('admin', 'Admin')], default='member', max_length=16)),
                        ('manager', models.ForeignKey(blank=True, help_text='Who this person reports to: an approval stage can ask "the requester\'s manager". Set on any of the person\'s roles in the organisation.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to=settings.AUTH_USER_MODEL)),
                        ('organization', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to='tenancy.organization', verbose_name='organisation')),
                    ],
                    options={
                        'db_table': 'agents_membership',
                        'constraints': [models.UniqueConstraint(fields=('organization', 'user', 'role'), name='membership_unique_role')],
                    },
                ),
            ],
        ),
        migrations.RunPython(relabel_content_types, relabel_back),
    ]
