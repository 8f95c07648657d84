"""MCP tools: what a later listing says differently waits for an operator (issue 44).

Schema only, on purpose: every existing tool keeps the flags it has (``is_write``,
``requires_confirmation``: an operator's once saved, or taken from the hints under the old rule and
left as they were), its stored hints become the ones accepted, and nothing waits for review until
the server's next listing says something else.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0026_prompt_hooks"),
    ]

    operations = [
        migrations.AddField(
            model_name="connectoraction",
            name="listing_to_review",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="MCP tools: what the server's latest listing says of the tool where it differs "
                "from what was accepted (its description, input_schema or annotations), kept for an "
                "operator to review; nothing of it is offered to agents until they accept it. Empty: "
                "nothing to review.",
            ),
        ),
        migrations.AlterField(
            model_name="connectoraction",
            name="annotations",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="MCP tools: the hints the server gave (readOnlyHint, destructiveHint, …) when its "
                "listing was first taken or last accepted by an operator. Its claim: never applied to "
                "the flags.",
            ),
        ),
    ]
