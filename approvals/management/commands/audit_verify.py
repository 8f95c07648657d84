"""Recompute the tamper-evident audit chains and name the first broken link of each organisation."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand, CommandError

from agents.models import Organization
from fimone.audit_chain import ChainLink, chain_verify
from fimone.models import ChainHead


def chained_models() -> list[type[ChainLink]]:
    """Every installed model that is a hash chain (confirmation events, and any log chained later)."""
    return sorted(
        (model for model in apps.get_models() if issubclass(model, ChainLink)),
        key=lambda model: model._meta.label_lower,
    )


class Command(BaseCommand):
    help = (
        "Recompute each organisation's audit hash chains (confirmation events and every other chained "
        "log) and name the first broken link: an edited, inserted or deleted row. Exits 1 if any chain "
        "is broken. Prints each chain's head: record it elsewhere to detect rows cut from the end later."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--organisation",
            "--organization",
            dest="organisation",
            help="Only this organisation (its id or exact name).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        wanted = options.get("organisation")
        organisation_ids: list[int] | None = None
        if wanted:
            query = Organization.objects.filter(name=wanted)
            if wanted.isdigit():
                query = query | Organization.objects.filter(pk=int(wanted))
            organisation_ids = list(query.values_list("pk", flat=True))
            if not organisation_ids:
                raise CommandError(f"no organisation with id or name {wanted!r}")
        names = dict(Organization.objects.values_list("pk", "name"))
        broken = 0
        for model in chained_models():
            partitions = set(model._default_manager.order_by().values_list(model.chain_partition, flat=True))
            # A chain whose every row was deleted still has its head.
            partitions |= set(
                ChainHead.objects.filter(chain=model._meta.label_lower).values_list("partition", flat=True)
            )
            partitions = sorted(partitions)
            if organisation_ids is not None:
                partitions = [p for p in partitions if p in organisation_ids]
            for partition in partitions:
                result = chain_verify(model, partition)
                where = f"{model._meta.label_lower} of organisation {partition} ({names.get(partition, '?')})"
                if result.broken is None:
                    self.stdout.write(f"ok      {where}: {result.verified} links, head {result.head_hash}")
                    continue
                broken += 1
                self.stdout.write(
                    self.style.ERROR(
                        f"BROKEN  {where}: first broken link #{result.broken.seq} "
                        + (f"(row {result.broken.pk})" if result.broken.pk is not None else "(no row)")
                        + f": {result.broken.problem}; "
                        f"{result.verified} links before it verify"
                    )
                )
        if broken:
            raise CommandError(f"{broken} audit chain(s) broken")
        self.stdout.write(self.style.SUCCESS("every audit chain verifies"))
