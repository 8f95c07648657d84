"""``manage.py hooks export|import``: an agent's (or an organisation's enforced) hook declarations
as YAML.

    python manage.py hooks export --agent 12 > agent-12.yaml
    python manage.py hooks export --organisation Acme > acme-enforced.yaml
    python manage.py hooks import agent-12.yaml [--agent 14]

Import replaces the target's declarations with the file's, all or nothing; a bad file is refused
with every problem as ``FILE:LINE: field.path: message``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.hook_declarations import HookFileError, hooks_export, hooks_import
from agents.models import Agent, Organization


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

    def handle(self, *args: Any, **options: Any) -> None:
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

    def stdin_text(self) -> str:
        import sys

        return sys.stdin.read()
