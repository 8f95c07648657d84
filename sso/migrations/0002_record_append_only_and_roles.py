from django.db import migrations

# Append-only on PostgreSQL, like the other audit records: a trigger refuses UPDATE and DELETE.
APPEND_ONLY_FUNCTION = """
CREATE OR REPLACE FUNCTION sso_sign_in_record_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'fimone: % on % refused: the sign-in record is append-only', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'Audit rows are inserted, never updated or deleted (DESIGN 1.15).';
END;
$$ LANGUAGE plpgsql
"""
TRIGGER = (
    "CREATE TRIGGER sso_sign_in_record_append_only BEFORE UPDATE OR DELETE ON sso_signinrecord "
    "FOR EACH ROW EXECUTE FUNCTION sso_sign_in_record_append_only()"
)


def install(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(APPEND_ONLY_FUNCTION, None)  # no parameters: its % are PL/pgSQL's
        schema_editor.execute(TRIGGER, None)


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP TRIGGER IF EXISTS sso_sign_in_record_append_only ON sso_signinrecord", None)
        schema_editor.execute("DROP FUNCTION IF EXISTS sso_sign_in_record_append_only()", None)


def sync_role_groups(apps, schema_editor):
    """Organisation admins configure identity providers; operators, admins and auditors read the
    providers and the sign-in record."""
    from tenancy.roles import role_groups_sync

    role_groups_sync(apps=apps)


class Migration(migrations.Migration):
    dependencies = [("sso", "0001_initial")]

    operations = [
        migrations.RunPython(install, uninstall),
        migrations.RunPython(sync_role_groups, migrations.RunPython.noop),
    ]
