"""Create (or refresh) the demo organisation, its users and the demo agent. Idempotent."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from agents.demo import DEMO_PASSWORD, demo_setup


class Command(BaseCommand):
    help = "Load the demo organisation, users (one per role), connector and agent."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--base-url", default=None, help="Where the demo payments service is served.")

    def handle(self, *args: Any, **options: Any) -> None:
        summary = demo_setup(base_url=options["base_url"])
        self.stdout.write(self.style.SUCCESS("Demo data is ready."))
        self.stdout.write(f"  Organisation: {summary['organization']}")
        self.stdout.write("  Logins (username / password):")
        for username, role in summary["users"]:
            self.stdout.write(f"    {username:10} / {DEMO_PASSWORD}   {role}")
