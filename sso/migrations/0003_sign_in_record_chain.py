"""The sign-in record becomes a link of each organisation's keyed audit chain, like the confirmation
events and the connector call log: the records already written are chained in the order they were
written (keyed with AUDIT_CHAIN_KEY, which this migration needs, as fimone's 0003 did), each
organisation's chain gets its sealed head, and ``audit_verify`` checks them from then on.

On PostgreSQL the append-only trigger (0002) is switched off while the chain's columns of the
records already written are filled in, and on again in the same transaction: nothing else writes
the table meanwhile."""

import ipaddress

from django.db import migrations, models

GENESIS = "0" * 64
CHAIN = "sso.signinrecord"
TABLE = "sso_signinrecord"
TRIGGER = "sso_sign_in_record_append_only"
HEAD_TABLE = "fimone_chainhead"
HEAD_TRIGGER = "fimone_chain_head_forward_only"


def _address(address):
    # sso.models.canonical_address as of this migration.
    if not address:
        return None
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return str(address)


def _payload(row) -> dict:
    # SignInRecord.chain_payload as of this migration (a migration keeps its own copy).
    from fimone.audit_chain import canonical_time

    return {
        "provider": row.provider_id,
        "user": row.user_id,
        "kind": str(row.kind),
        "subject": row.subject,
        "email": row.email,
        "role": row.role,
        "detail": row.detail,
        "address": _address(row.address),
        "created_at": canonical_time(row.created_at),
    }


def _trigger(schema_editor, state: str, table: str = TABLE, trigger: str = TRIGGER) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE {table} {state} TRIGGER {trigger}", None)


def trigger_off(apps, schema_editor) -> None:
    _trigger(schema_editor, "DISABLE")


def trigger_on(apps, schema_editor) -> None:
    _trigger(schema_editor, "ENABLE")


def chain_existing_records(apps, schema_editor) -> None:
    """Number and hash each organisation's records in the order they were written (by id), and
    give each organisation's chain its head at its last link, sealed with the key."""
    from fimone.audit_chain import current_key, head_seal, keyed_link_hash

    alias = schema_editor.connection.alias
    record = apps.get_model("sso", "SignInRecord")
    head = apps.get_model("fimone", "ChainHead")
    key = current_key()
    partition, seq, prev, batch, heads = None, 0, GENESIS, [], {}
    rows = record.objects.using(alias).order_by("organization_id", "pk")
    for row in rows.iterator(chunk_size=2000):
        if row.organization_id != partition:
            partition, seq, prev = row.organization_id, 0, GENESIS
        seq += 1
        document = {"chain": CHAIN, "partition": partition, "seq": seq, "row": _payload(row)}
        row.chain_seq, row.prev_hash, row.entry_hash = seq, prev, keyed_link_hash(key, prev, document)
        heads[partition] = (seq, row.prev_hash, row.entry_hash)
        prev = row.entry_hash
        batch.append(row)
        if len(batch) >= 1000:
            record.objects.using(alias).bulk_update(batch, ["chain_seq", "prev_hash", "entry_hash"])
            batch = []
    if batch:
        record.objects.using(alias).bulk_update(batch, ["chain_seq", "prev_hash", "entry_hash"])
    head.objects.using(alias).bulk_create(
        [
            head(
                chain=CHAIN,
                partition=partition,
                seq=seq,
                prev_hash=prev_hash,
                entry_hash=entry_hash,
                unkeyed_until=0,
                seal=head_seal(
                    key, chain=CHAIN, partition=partition, unkeyed_until=0, seq=seq, entry_hash=entry_hash
                ),
            )
            for partition, (seq, prev_hash, entry_hash) in sorted(heads.items())
        ]
    )


def unchain(apps, schema_editor) -> None:
    """Back to records outside the chain: the chain's heads go with its columns (on PostgreSQL
    past the trigger that keeps a head from being deleted, as only this reversal may)."""
    _trigger(schema_editor, "DISABLE", HEAD_TABLE, HEAD_TRIGGER)
    apps.get_model("fimone", "ChainHead").objects.using(schema_editor.connection.alias).filter(
        chain=CHAIN
    ).delete()
    _trigger(schema_editor, "ENABLE", HEAD_TABLE, HEAD_TRIGGER)


class Migration(migrations.Migration):
    dependencies = [
        ("sso", "0002_record_append_only_and_roles"),
        ("fimone", "0003_chain_heads_keyed"),
    ]

    operations = [
        migrations.RunPython(trigger_off, trigger_on),
        migrations.AddField(
            model_name="signinrecord",
            name="chain_seq",
            field=models.PositiveBigIntegerField(default=0, editable=False),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="signinrecord",
            name="entry_hash",
            field=models.CharField(
                default=GENESIS,
                editable=False,
                help_text="HMAC-SHA256 under AUDIT_CHAIN_KEY of this row and prev_hash (plain SHA-256 for "
                "links written before the chain was keyed).",
                max_length=64,
            ),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="signinrecord",
            name="prev_hash",
            field=models.CharField(default=GENESIS, editable=False, max_length=64),
            preserve_default=False,
        ),
        migrations.RunPython(chain_existing_records, unchain),
        migrations.AddConstraint(
            model_name="signinrecord",
            constraint=models.UniqueConstraint(
                fields=("organization", "chain_seq"), name="signinrecord_chain_link"
            ),
        ),
        migrations.RunPython(trigger_on, trigger_off),
    ]
