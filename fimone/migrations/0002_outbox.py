from django.db import migrations, models

#: PostgreSQL tells the relay about new rows: one NOTIFY per statement that inserted any (a
#: statement-level trigger fires for none too), delivered when its transaction commits and never
#: for one rolled back.
NOTIFY_FUNCTION = """
CREATE OR REPLACE FUNCTION fimone_outbox_notify() RETURNS trigger AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM inserted) THEN
        PERFORM pg_notify('fimone_outbox', '');
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql
"""
NOTIFY_TRIGGER = (
    "CREATE TRIGGER fimone_outbox_notify AFTER INSERT ON fimone_outboxmessage "
    "REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION fimone_outbox_notify()"
)


def notify_on_insert(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(NOTIFY_FUNCTION)
        schema_editor.execute(NOTIFY_TRIGGER)


def drop_notify(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP TRIGGER IF EXISTS fimone_outbox_notify ON fimone_outboxmessage")
        schema_editor.execute("DROP FUNCTION IF EXISTS fimone_outbox_notify()")


class Migration(migrations.Migration):
    dependencies = [("fimone", "0001_initial")]

    operations = [
        migrations.CreateModel(
            name="OutboxMessage",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("task", models.CharField(help_text="The Celery task's registered name.", max_length=200)),
                ("args", models.JSONField(default=list, help_text="Its positional arguments.")),
                ("created_at", models.DateTimeField()),
            ],
            options={"verbose_name": "outbox message"},
        ),
        migrations.RunPython(notify_on_insert, drop_notify),
    ]
