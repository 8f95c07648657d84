"""A hook declaration's ``enabled`` becomes its ``mode``: ``enforce`` (enabled), ``shadow`` (new:
it runs and what it would have done is recorded, the call going on as if it were absent) or
``off`` (disabled). The history's rows follow, so a declaration's past reads the same."""

from django.db import migrations, models

MODE = models.CharField(
    choices=[("enforce", "Enforce"), ("shadow", "Shadow (record what it would do)"), ("off", "Off")],
    default="enforce",
    help_text="Enforce: its decisions apply. Shadow: it runs and what it would have done (block, "
    "rewrite, ask) is recorded, but the call goes on as if it were absent. Off: not in the chain.",
    max_length=8,
)


def to_mode(apps, schema_editor):
    for name in ("HookDeclaration", "HistoricalHookDeclaration"):
        model = apps.get_model("agents", name)
        model.objects.filter(enabled=False).update(mode="off")


def to_enabled(apps, schema_editor):
    for name in ("HookDeclaration", "HistoricalHookDeclaration"):
        model = apps.get_model("agents", name)
        model.objects.filter(mode="off").update(enabled=False)


class Migration(migrations.Migration):
    dependencies = [("agents", "0022_membership_manager")]

    operations = [
        migrations.AddField(model_name="hookdeclaration", name="mode", field=MODE),
        migrations.AddField(model_name="historicalhookdeclaration", name="mode", field=MODE),
        migrations.RunPython(to_mode, to_enabled),
        migrations.RemoveField(model_name="hookdeclaration", name="enabled"),
        migrations.RemoveField(model_name="historicalhookdeclaration", name="enabled"),
    ]
