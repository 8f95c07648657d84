"""The audit chains become keyed (HMAC-SHA256 under AUDIT_CHAIN_KEY, fimone/audit_chain.py).

The links already written stay as they are (plain SHA-256) and keep verifying: every chain gets
a head (at its last link if it had none), which records how many of its links are unkeyed
(``unkeyed_until``) and is sealed with the key, so no later link can pass for an unkeyed one.
The hashes an operator noted from ``audit_verify`` before the upgrade are still the links'
hashes. On PostgreSQL a trigger then lets an ``UPDATE`` of a head only move it one link on, and
refuses its ``DELETE``.
"""

from django.db import migrations, models

#: The chained tables as of this migration: (app, model, chain label).
CHAINS = (
    ("approvals", "ConfirmationEvent", "approvals.confirmationevent"),
    ("agents", "ConnectorCallLog", "agents.connectorcalllog"),
)

HEAD_FUNCTION = """
CREATE OR REPLACE FUNCTION fimone_chain_head_forward_only() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'fimone: DELETE on % refused: the head of an audit chain is never deleted',
            TG_TABLE_NAME
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'The audit record is append-only (DESIGN 1.15).';
    END IF;
    IF NEW.chain IS DISTINCT FROM OLD.chain OR NEW.partition IS DISTINCT FROM OLD.partition
       OR NEW.unkeyed_until IS DISTINCT FROM OLD.unkeyed_until
       OR NEW.seq IS DISTINCT FROM OLD.seq + 1 OR NEW.prev_hash IS DISTINCT FROM OLD.entry_hash THEN
        RAISE EXCEPTION 'fimone: UPDATE on % refused: the head of an audit chain only moves one link on',
            TG_TABLE_NAME
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'The audit record is append-only (DESIGN 1.15).';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql
"""
HEAD_TRIGGER = (
    "CREATE TRIGGER fimone_chain_head_forward_only BEFORE UPDATE OR DELETE ON fimone_chainhead "
    "FOR EACH ROW EXECUTE FUNCTION fimone_chain_head_forward_only()"
)


def seal_heads(apps, schema_editor):
    from fimone.audit_chain import GENESIS, current_key, head_seal

    alias = schema_editor.connection.alias
    Head = apps.get_model("fimone", "ChainHead")
    key = current_key()
    for app, name, chain in CHAINS:
        model = apps.get_model(app, name)
        heads = {head.partition: head for head in Head.objects.using(alias).filter(chain=chain)}
        last = {}
        links = model.objects.using(alias).order_by("organization_id", "chain_seq")
        for partition, seq, entry_hash, prev_hash in links.values_list(
            "organization_id", "chain_seq", "entry_hash", "prev_hash"
        ).iterator(chunk_size=2000):
            last[partition] = (seq, entry_hash, prev_hash)
        for partition in sorted(set(heads) | set(last)):
            head = heads.get(partition)
            if head is None:
                seq, entry_hash, prev_hash = last[partition]
                head = Head(
                    chain=chain, partition=partition, seq=seq, entry_hash=entry_hash, prev_hash=prev_hash
                )
            # Every link written so far is unkeyed; a head ahead of its links (rows cut from the
            # end) keeps saying so, and audit_verify names the gap.
            head.unkeyed_until = max(head.seq, last.get(partition, (0, GENESIS, GENESIS))[0])
            head.seal = head_seal(
                key,
                chain=chain,
                partition=partition,
                unkeyed_until=head.unkeyed_until,
                seq=head.seq,
                entry_hash=head.entry_hash,
            )
            head.save(using=alias)
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(HEAD_FUNCTION, None)  # no parameters: its % are PL/pgSQL's
        schema_editor.execute(HEAD_TRIGGER, None)


def unseal_heads(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP TRIGGER IF EXISTS fimone_chain_head_forward_only ON fimone_chainhead")
        schema_editor.execute("DROP FUNCTION IF EXISTS fimone_chain_head_forward_only()")


class Migration(migrations.Migration):
    dependencies = [
        ("fimone", "0002_outbox"),
        ("approvals", "0010_escalation"),
        ("agents", "0015_connector_call_log_chain"),
    ]

    operations = [
        migrations.AddField(
            model_name="chainhead",
            name="seal",
            field=models.CharField(
                blank=True, help_text="HMAC of this row under AUDIT_CHAIN_KEY.", max_length=64
            ),
        ),
        migrations.AddField(
            model_name="chainhead",
            name="unkeyed_until",
            field=models.PositiveBigIntegerField(
                default=0,
                help_text="Links up to this number are plain SHA-256 (written before the chain was keyed).",
            ),
        ),
        migrations.RunPython(seal_heads, unseal_heads),
    ]
