"""The connector call log cannot be rewritten quietly (docs/design.md §1.15): on PostgreSQL a trigger
refuses any ``UPDATE`` or ``DELETE`` of a logged call (``TRUNCATE`` and dropping the trigger are
left to the table's owner; the keyed chain and its anchors find such a rewrite)."""

from django.db import migrations, models

APPEND_ONLY_FUNCTION = """
CREATE OR REPLACE FUNCTION agents_call_log_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'fimone: % on % refused: the connector call log is append-only', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'Audit rows are inserted, never updated or deleted (DESIGN 1.15).';
END;
$$ LANGUAGE plpgsql
"""
TRIGGER = (
    "CREATE TRIGGER agents_call_log_append_only BEFORE UPDATE OR DELETE ON agents_connectorcalllog "
    "FOR EACH ROW EXECUTE FUNCTION agents_call_log_append_only()"
)


def install(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(APPEND_ONLY_FUNCTION, None)  # no parameters: its % are PL/pgSQL's
        schema_editor.execute(TRIGGER, None)


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            "DROP TRIGGER IF EXISTS agents_call_log_append_only ON agents_connectorcalllog", None
        )
        schema_editor.execute("DROP FUNCTION IF EXISTS agents_call_log_append_only()", None)


class Migration(migrations.Migration):
    dependencies = [("agents", "0015_connector_call_log_chain")]

    operations = [
        migrations.AlterField(
            model_name="connectorcalllog",
            name="entry_hash",
            field=models.CharField(
                editable=False,
                help_text="HMAC-SHA256 under AUDIT_CHAIN_KEY of this row and prev_hash (plain SHA-256 for "
                "links written before the chain was keyed).",
                max_length=64,
            ),
        ),
        migrations.RunPython(install, uninstall),
    ]
