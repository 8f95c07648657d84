"""``manage.py eval_run <eval set id> <agent id> --user <username>``: run an eval set on an agent
with hooks bypassed, wait for every case, print each verdict and the pass rate."""

from __future__ import annotations

import time
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.models import Agent
from evals.models import EvalRun, EvalSet, EvalStatus
from evals.services import eval_run_start
from fimone.errors import ServiceError


class Command(BaseCommand):
    help = "Run an eval set on an agent (hooks bypassed, no confirmation-requiring tool executed)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("eval_set", type=int, help="The eval set's id.")
        parser.add_argument("agent", type=int, help="The agent's id.")
        parser.add_argument("--user", required=True, help="An operator of the organisation, who starts it.")
        parser.add_argument("--timeout", type=float, default=600.0, help="Seconds to wait for the cases.")

    def handle(self, *args: Any, **options: Any) -> None:
        user = get_user_model().objects.filter(username=options["user"]).first()
        eval_set = EvalSet.objects.filter(pk=options["eval_set"]).first()
        agent = Agent.objects.filter(pk=options["agent"]).first()
        if user is None or eval_set is None or agent is None:
            raise CommandError("no such user, eval set or agent")
        try:
            eval_run = eval_run_start(eval_set=eval_set, agent=agent, user=user)
        except ServiceError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(
            f"Eval run {eval_run.pk}: {eval_run.total} case(s) of {eval_set} on {agent}, hooks bypassed"
        )
        deadline = time.monotonic() + options["timeout"]
        while True:
            eval_run = EvalRun.objects.get(pk=eval_run.pk)
            if eval_run.status == EvalStatus.COMPLETED:
                break
            if time.monotonic() > deadline:
                raise CommandError(f"eval run {eval_run.pk} did not finish in time; see it in the admin")
            time.sleep(0.2)
        for result in eval_run.results.all():
            line = f"  case {result.position + 1}: {result.outcome}"
            self.stdout.write(line + (f" ({result.detail})" if result.detail else ""))
        self.stdout.write(f"Passed {eval_run.passed}/{eval_run.total} ({eval_run.pass_rate:.0%})")
