# Confirmation events become links of a per-organisation hash chain (fimone/audit_chain.py). The
# events already stored are chained here, per organisation in the order they were written, so
# audit_verify covers the whole history from this migration on.

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

from fimone.audit_chain import GENESIS, canonical_time, link_hash


def chain_existing_events(apps, schema_editor):
    Event = apps.get_model("approvals", "ConfirmationEvent")
    Request = apps.get_model("approvals", "ConfirmationRequest")
    organisation_of = dict(Request.objects.values_list("pk", "organization_id"))
    heads = {}
    for event in Event.objects.order_by("created_at", "pk").iterator(chunk_size=2000):
        organization_id = organisation_of[event.request_id]
        seq, prev_hash = heads.get(organization_id, (0, GENESIS))
        seq += 1
        document = {
            "chain": "approvals.confirmationevent",
            "partition": organization_id,
            "seq": seq,
            "row": {
                "request": str(event.request_id),
                "kind": str(event.kind),
                "actor": event.actor_id,
                "actor_external_id": event.actor_external_id,
                "details": event.details,
                "created_at": canonical_time(event.created_at),
            },
        }
        entry_hash = link_hash(prev_hash, document)
        Event.objects.filter(pk=event.pk).update(
            organization_id=organization_id, chain_seq=seq, prev_hash=prev_hash, entry_hash=entry_hash
        )
        heads[organization_id] = (seq, entry_hash)
    if schema_editor.connection.vendor == "postgresql":
        # Check the new foreign keys now, so the columns can be made NOT NULL in this transaction.
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0001_initial'),
        ('approvals', '0005_confirmation_approver_protected'),
    ]

    operations = [
        migrations.AddField(
            model_name='confirmationevent',
            name='organization',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='agents.organization'),
        ),
        migrations.AddField(
            model_name='confirmationevent',
            name='chain_seq',
            field=models.PositiveBigIntegerField(editable=False, null=True),
        ),
        migrations.AddField(
            model_name='confirmationevent',
            name='prev_hash',
            field=models.CharField(default='', editable=False, max_length=64),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name='confirmationevent',
            name='entry_hash',
            field=models.CharField(default='', editable=False, help_text='SHA-256 of this row and prev_hash.', max_length=64),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name='confirmationevent',
            name='created_at',
            field=models.DateTimeField(default=django.utils.timezone.now, editable=False),
        ),
        migrations.RunPython(chain_existing_events, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='confirmationevent',
            name='organization',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='agents.organization'),
        ),
        migrations.AlterField(
            model_name='confirmationevent',
            name='chain_seq',
            field=models.PositiveBigIntegerField(editable=False),
        ),
        migrations.AddConstraint(
            model_name='confirmationevent',
            constraint=models.UniqueConstraint(fields=('organization', 'chain_seq'), name='confirmation_event_chain_link'),
        ),
    ]
