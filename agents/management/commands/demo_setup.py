"""Create the demo organisation, its users and the demo agent, or reset them. Idempotent."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from agents.demo import DEMO_PASSWORD, RESEED_COMMAND, demo_setup


class Command(BaseCommand):
    help = (
        "Load the demo organisation, users (one per role), connector, agent and approver policy, or "
        "reset them: the purchases and the demo's configuration go back to their first state."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--base-url", default=None, help="Where the demo payments service is served.")

    def handle(self, *args: Any, **options: Any) -> None:
        summary = demo_setup(base_url=options["base_url"])
        self.stdout.write(self.style.SUCCESS("Demo data is ready (reset to its first state)."))
        self.stdout.write(f"  Organisation: {summary['organization']}")
        self.stdout.write(f"  Agent: {summary['agent']['name']}")
        for line in summary["seeded"]:
            self.stdout.write(f"  {line}")
        self.stdout.write("  Logins (username / password):")
        for username, role in summary["users"]:
            self.stdout.write(f"    {username:10} / {DEMO_PASSWORD}   {role}")
        self.stdout.write(
            f"  Used the demo up (every purchase paid)? Run `{RESEED_COMMAND}` again to reset it; "
            "`make run` does it at every start."
        )
