"""The connector call log becomes a tamper-evident hash chain per organisation, like the
confirmation history: existing rows are chained in the order they were written."""

import django.utils.timezone
from django.db import migrations, models

GENESIS = "0" * 64


def _payload(row) -> dict:
    # ConnectorCallLog.chain_payload as of this migration (a migration keeps its own copy).
    from fimone.audit_chain import canonical_time

    return {
        "agent": row.agent_id,
        "user": row.user_id,
        "run": row.run_id,
        "tool_call_id": row.tool_call_id,
        "tool_name": row.tool_name,
        "connector_slug": row.connector_slug,
        "arguments": row.arguments,
        "outcome": str(row.outcome),
        "blocked_by": row.blocked_by,
        "duration_ms": row.duration_ms,
        "result_size": row.result_size,
        "result_sha256": row.result_sha256,
        "error": row.error,
        "created_at": canonical_time(row.created_at),
    }


def chain_existing_rows(apps, schema_editor) -> None:
    from fimone.audit_chain import link_hash

    log = apps.get_model("agents", "ConnectorCallLog")
    rows = log.objects.using(schema_editor.connection.alias).order_by("organization_id", "pk")
    partition, seq, prev, batch = None, 0, GENESIS, []
    for row in rows.iterator(chunk_size=2000):
        if row.organization_id != partition:
            partition, seq, prev = row.organization_id, 0, GENESIS
        seq += 1
        document = {
            "chain": "agents.connectorcalllog",
            "partition": partition,
            "seq": seq,
            "row": _payload(row),
        }
        row.chain_seq, row.prev_hash, row.entry_hash = seq, prev, link_hash(prev, document)
        prev = row.entry_hash
        batch.append(row)
        if len(batch) >= 1000:
            log.objects.bulk_update(batch, ["chain_seq", "prev_hash", "entry_hash"])
            batch = []
    if batch:
        log.objects.bulk_update(batch, ["chain_seq", "prev_hash", "entry_hash"])


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0014_run_children_and_delegates"),
        ("fimone", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="connectorcalllog",
            name="chain_seq",
            field=models.PositiveBigIntegerField(default=0, editable=False),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="connectorcalllog",
            name="entry_hash",
            field=models.CharField(
                default=GENESIS, editable=False, help_text="SHA-256 of this row and prev_hash.", max_length=64
            ),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="connectorcalllog",
            name="prev_hash",
            field=models.CharField(default=GENESIS, editable=False, max_length=64),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name="connectorcalllog",
            name="created_at",
            field=models.DateTimeField(db_index=True, default=django.utils.timezone.now, editable=False),
        ),
        migrations.RunPython(chain_existing_rows, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="connectorcalllog",
            constraint=models.UniqueConstraint(
                fields=("organization", "chain_seq"), name="connectorcalllog_chain_link"
            ),
        ),
    ]
