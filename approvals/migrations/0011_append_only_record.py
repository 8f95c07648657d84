"""The approval record cannot be rewritten quietly (docs/design.md §1.15).

On PostgreSQL, triggers refuse any ``UPDATE`` or ``DELETE`` of a confirmation event or vote, any
``DELETE`` of a confirmation request, and any change of a settled request's verdict: its status,
who decided, when, why, and what (the arguments and their hash, the proposed ones and who edited
them) and for whom. A pending request changes as before (escalation, edits, the conditional
update that settles it), and so do the delivery fields of a settled one (its card's message id).
``TRUNCATE`` fires no row trigger: it is left to the tables' owner, as is dropping the triggers;
the keyed chain and its anchors (``audit_verify``) are what find such a rewrite.
"""

from django.db import migrations, models

APPEND_ONLY_FUNCTION = """
CREATE OR REPLACE FUNCTION approvals_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'fimone: % on % refused: the approval record is append-only', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'Audit rows are inserted, never updated or deleted (DESIGN 1.15).';
END;
$$ LANGUAGE plpgsql
"""

#: The columns of a request that its verdict settles for good.
VERDICT_COLUMNS = (
    "status",
    "responded_by_id",
    "responded_by_external_id",
    "responded_at",
    "reason",
    "tool_args",
    "args_sha256",
    "proposed_args",
    "proposed_args_sha256",
    "edited_by_id",
    "organization_id",
    "agent_id",
    "requested_by_id",
    "run_id",
    "tool_call_id",
    "tool_name",
)

VERDICT_FUNCTION = f"""
CREATE OR REPLACE FUNCTION approvals_verdict_final() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'fimone: DELETE on % refused: confirmation requests are history, never deleted',
            TG_TABLE_NAME
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'The audit record is append-only (DESIGN 1.9, 1.15).';
    END IF;
    IF OLD.status <> 'pending'
       AND ROW({", ".join(f"NEW.{c}" for c in VERDICT_COLUMNS)})
           IS DISTINCT FROM ROW({", ".join(f"OLD.{c}" for c in VERDICT_COLUMNS)}) THEN
        RAISE EXCEPTION 'fimone: UPDATE on % refused: request % is %, and a verdict is final',
            TG_TABLE_NAME, OLD.id, OLD.status
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'A request leaves pending once; its verdict never changes (DESIGN 1.4, 1.15).';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql
"""

TRIGGERS = (
    ("approvals_event_append_only", "approvals_confirmationevent", "approvals_append_only"),
    ("approvals_vote_append_only", "approvals_confirmationvote", "approvals_append_only"),
    ("approvals_verdict_final", "approvals_confirmationrequest", "approvals_verdict_final"),
)


def install(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    # No parameters: the % are PL/pgSQL's.
    schema_editor.execute(APPEND_ONLY_FUNCTION, None)
    schema_editor.execute(VERDICT_FUNCTION, None)
    for name, table, function in TRIGGERS:
        schema_editor.execute(
            f"CREATE TRIGGER {name} BEFORE UPDATE OR DELETE ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION {function}()",
            None,
        )


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, table, _function in TRIGGERS:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}", None)
    schema_editor.execute("DROP FUNCTION IF EXISTS approvals_verdict_final()", None)
    schema_editor.execute("DROP FUNCTION IF EXISTS approvals_append_only()", None)


class Migration(migrations.Migration):
    dependencies = [("approvals", "0010_escalation")]

    operations = [
        migrations.AlterField(
            model_name="confirmationevent",
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
