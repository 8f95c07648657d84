"""``manage.py hooks export|import``: an agent's (or an organisation's enforced) hook declarations
as YAML; ``import-claude`` and ``import-fimone``: hooks brought from Claude Code or FIM One.

    python manage.py hooks export --agent 12 > agent-12.yaml
    python manage.py hooks export --organisation Acme > acme-enforced.yaml
    python manage.py hooks import agent-12.yaml [--agent 14]
    python manage.py hooks import-claude .claude/settings.json --agent 12 --project-dir "$PWD" [--dry-run]
    python manage.py hooks import-fimone fim-one-agent.json --agent 12 [--dry-run]

Import replaces the target's declarations with the file's, all or nothing; a bad file is refused
with every problem as ``FILE:LINE: field.path: message``. ``import-claude`` and ``import-fimone``
add to the agent's declarations, all or nothing (:mod:`console.hook_import`), and report what was
imported and what was skipped, with why; a file they cannot read exits non-zero saying why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.hook_declarations import HookFileError, hooks_export, hooks_import
from agents.models import Agent
from console.hook_import import CLAUDE, FIM_ONE, HookImportError, hook_import_plan, hook_import_save
from fimone.errors import ServiceError
from tenancy.models import Organization

BRING = {"import-claude": CLAUDE, "import-fimone": FIM_ONE}


class Command(BaseCommand):
    help = "Export or import hook declarations as YAML."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        export = sub.add_parser("export", help="write an agent's or an organisation's hooks as YAML")
        imp = sub.add_parser("import", help="replace an agent's or an organisation's hooks from YAML")
        imp.add_argument("file", help="the YAML file ('-' for standard input)")
        for p in (export, imp):
            target = p.add_mutually_exclusive_group(required=p is export)
            target.add_argument("--agent", type=int, help="the agent's id")
            target.add_argument("--organisation", "--organization", dest="organisation", help="its name")
        export.add_argument("--output", "-o", help="write to this file instead of standard output")
        claude = sub.add_parser(
            "import-claude", help="add the hooks of a Claude Code settings file to an agent, as command hooks"
        )
        fim_one = sub.add_parser(
            "import-fimone", help="add the hooks of a FIM One agent configuration (or its model_config_json)"
        )
        for p in (claude, fim_one):
            p.add_argument("file", help="the JSON file ('-' for standard input)")
            p.add_argument("--agent", type=int, required=True, help="the agent's id")
            p.add_argument("--dry-run", action="store_true", help="print what it would import; save nothing")
        claude.add_argument(
            "--project-dir", help="what $CLAUDE_PROJECT_DIR stands for: the folder your .claude is in"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] in BRING:
            self.bring(source=BRING[options["action"]], **options)
            return
        agent = organization = None
        if options.get("agent") is not None:
            agent = Agent.objects.filter(pk=options["agent"]).select_related("organization").first()
            if agent is None:
                raise CommandError(f"no agent with id {options['agent']}")
        if options.get("organisation"):
            organization = Organization.objects.filter(name=options["organisation"]).first()
            if organization is None:
                raise CommandError(f"no organisation named {options['organisation']!r}")
        if options["action"] == "export":
            text = hooks_export(agent=agent, organization=organization)
            if options.get("output"):
                Path(options["output"]).write_text(text, encoding="utf-8")
            else:
                self.stdout.write(text, ending="")
            return
        name = options["file"]
        try:
            text = self.stdin_text() if name == "-" else Path(name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"{name}: cannot be read: {exc}") from None
        try:
            rows = hooks_import(text=text, filename=name, agent=agent, organization=organization)
        except HookFileError as exc:
            raise CommandError("\n".join(exc.problems)) from None
        self.stdout.write(f"imported {len(rows)} hook declaration(s)")

    def bring(self, *, source: str, file: str, agent: int, dry_run: bool, **options: Any) -> None:
        """``import-claude`` / ``import-fimone``: read, translate, report; save unless a dry run."""
        target = Agent.objects.filter(pk=agent).select_related("organization").first()
        if target is None:
            raise CommandError(f"no agent with id {agent}")
        try:
            text = self.stdin_text() if file == "-" else Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"{file}: cannot be read: {exc}") from None
        try:
            plan = hook_import_plan(source=source, text=text, project_dir=options.get("project_dir"))
            if not dry_run:
                hook_import_save(agent=target, plan=plan, actor=None)
        except (HookImportError, ServiceError) as exc:
            raise CommandError(f"{file}: {exc}") from None
        self.stdout.write("\n".join(plan.report(saved=not dry_run)))

    def stdin_text(self) -> str:
        import sys

        return sys.stdin.read()
