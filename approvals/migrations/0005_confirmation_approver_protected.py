# The approver snapshot's table gets a model of its own so its rows are PROTECTed like the rest of
# a request's history. The table, its columns and indexes stay exactly as they are: state only.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('approvals', '0004_history_protected'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name='ConfirmationApprover',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('request', models.ForeignKey(db_column='confirmationrequest_id', on_delete=django.db.models.deletion.PROTECT, related_name='+', to='approvals.confirmationrequest')),
                        ('user', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'approvals_confirmationrequest_approvers',
                        'unique_together': {('request', 'user')},
                    },
                ),
                migrations.AlterField(
                    model_name='confirmationrequest',
                    name='approvers',
                    field=models.ManyToManyField(related_name='approvable_requests', through='approvals.ConfirmationApprover', to=settings.AUTH_USER_MODEL),
                ),
            ],
        ),
    ]
