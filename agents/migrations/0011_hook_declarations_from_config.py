"""Move each agent's ``model_config_json["hooks"]["class_hooks"]`` into HookDeclaration rows.

Declarations keep their order (priorities are left as declared; equal ones keep row order). A list
that cannot be read (not a list, an item of the wrong shape) is left in the JSON, where it is still
honoured, and refused, exactly as before. Reversible: rows of kind "class" go back into the JSON.
"""

from django.db import migrations

TUNABLE = ("priority", "timeout", "on_error")


def _parse(declaration):
    if not isinstance(declaration, list):
        return None
    parsed = []
    for item in declaration:
        if isinstance(item, str):
            parsed.append((item, {}))
        elif (
            isinstance(item, dict)
            and isinstance(item.get("name"), str)
            and set(item) <= {"name", "params"}
            and isinstance(item.get("params", {}), dict)
        ):
            parsed.append((item["name"], dict(item.get("params", {}))))
        else:
            return None
    return parsed


def forwards(apps, schema_editor):
    Agent = apps.get_model("agents", "Agent")
    HookDeclaration = apps.get_model("agents", "HookDeclaration")
    for agent in Agent.objects.all().iterator():
        config = agent.model_config_json
        hooks = config.get("hooks") if isinstance(config, dict) else None
        if not isinstance(hooks, dict) or "class_hooks" not in hooks:
            continue
        parsed = _parse(hooks["class_hooks"])
        if parsed is None:
            continue
        for name, params in parsed:
            tunables = {key: params.pop(key) for key in TUNABLE if key in params}
            HookDeclaration.objects.create(
                organization_id=agent.organization_id,
                agent=agent,
                kind="class",
                name=name[:100],
                params=params,
                priority=tunables.get("priority"),
                timeout=tunables.get("timeout"),
                on_error=tunables.get("on_error") or "",
            )
        rest = {k: v for k, v in hooks.items() if k != "class_hooks"}
        config = {k: v for k, v in config.items() if k != "hooks"}
        if rest:
            config["hooks"] = rest
        agent.model_config_json = config
        agent.save(update_fields=["model_config_json"])


def backwards(apps, schema_editor):
    Agent = apps.get_model("agents", "Agent")
    HookDeclaration = apps.get_model("agents", "HookDeclaration")
    rows = HookDeclaration.objects.filter(agent__isnull=False, kind="class").order_by("agent_id", "pk")
    by_agent = {}
    for row in rows:
        params = dict(row.params or {})
        for key in TUNABLE:
            value = getattr(row, key)
            if value not in (None, ""):
                params[key] = value
        by_agent.setdefault(row.agent_id, []).append({"name": row.name, "params": params})
    for agent in Agent.objects.filter(pk__in=by_agent):
        config = dict(agent.model_config_json or {})
        hooks = dict(config.get("hooks") or {})
        hooks["class_hooks"] = [*(hooks.get("class_hooks") or []), *by_agent[agent.pk]]
        config["hooks"] = hooks
        agent.model_config_json = config
        agent.save(update_fields=["model_config_json"])
    rows.delete()


class Migration(migrations.Migration):
    dependencies = [("agents", "0010_hook_declarations")]

    operations = [migrations.RunPython(forwards, backwards)]
