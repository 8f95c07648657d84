"""Recompute the tamper-evident audit chains and name whatever does not hold (docs/design.md §1.15): the
first broken link of each organisation's chain, a chain or a head that is missing, a verdict
edited on its request, and, against anchors kept outside the database, a chain rewritten since."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand, CommandError

from approvals.audit import organisations_owing_a_chain, verdict_findings
from approvals.models import ConfirmationEvent
from fimone.audit_chain import ChainLink, Verification, anchor_unsigned, chain_verify, link_at
from fimone.models import ChainHead
from tenancy.models import Organization


def chained_models() -> list[type[ChainLink]]:
    """Every installed model that is a hash chain (confirmation events, and any log chained later)."""
    return sorted(
        (model for model in apps.get_models() if issubclass(model, ChainLink)),
        key=lambda model: model._meta.label_lower,
    )


class Command(BaseCommand):
    help = (
        "Recompute each organisation's audit hash chains (confirmation events and every other chained "
        "log) and name what does not hold: an edited, inserted or deleted row, a row recomputed without "
        "the audit key, rows cut from the end, a chain or a head deleted, a request whose verdict differs "
        "from the one its chain recorded; with --anchor, a chain rewritten after an anchor of "
        "audit_anchor, even with the key. Exits 1 on any finding."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--organisation",
            "--organization",
            dest="organisation",
            help="Only this organisation (its id or exact name).",
        )
        parser.add_argument(
            "--anchor",
            action="append",
            default=[],
            metavar="FILE",
            help="Anchors written by audit_anchor (JSON lines): each chain must still hold, at each "
            "anchored number, the anchored hash. May be given more than once.",
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
        self.names = dict(Organization.objects.values_list("pk", "name"))
        self.broken: set[tuple[str, Any]] = set()
        owing = organisations_owing_a_chain()
        for model in chained_models():
            label = model._meta.label_lower
            owed = owing.get(label, {})
            partitions = set(model._default_manager.order_by().values_list(model.chain_partition, flat=True))
            # A chain whose every row was deleted still has its head; one deleted head and all is owed.
            partitions |= set(ChainHead.objects.filter(chain=label).values_list("partition", flat=True))
            partitions |= set(owed)
            if organisation_ids is not None:
                partitions &= set(organisation_ids)
            for partition in sorted(partitions):
                self.verify_chain(model, partition, owed.get(partition))
        for path in options.get("anchor") or []:
            self.check_anchors(Path(path), organisation_ids)
        if self.broken:
            raise CommandError(f"{len(self.broken)} audit chain(s) broken")
        self.stdout.write(self.style.SUCCESS("every audit chain verifies"))

    def where(self, label: str, partition: Any) -> str:
        return f"{label} of organisation {partition} ({self.names.get(partition, '?')})"

    def finding(self, label: str, partition: Any, text: str) -> None:
        self.broken.add((label, partition))
        self.stdout.write(self.style.ERROR(f"BROKEN  {self.where(label, partition)}: {text}"))

    def verify_chain(self, model: type[ChainLink], partition: Any, owed: str | None) -> None:
        label = model._meta.label_lower
        result: Verification = chain_verify(model, partition)
        if result.broken is not None:
            broken = result.broken
            if broken.seq is None:
                self.finding(label, partition, broken.problem + (f", although {owed}" if owed else ""))
            else:
                self.finding(
                    label,
                    partition,
                    f"first broken link #{broken.seq} "
                    + (f"(row {broken.pk})" if broken.pk is not None else "(no row)")
                    + f": {broken.problem}; {result.verified} links before it verify",
                )
        if model is ConfirmationEvent:
            for verdict in verdict_findings(organization_id=partition):
                self.finding(label, partition, str(verdict))
        if (label, partition) not in self.broken:
            self.stdout.write(
                f"ok      {self.where(label, partition)}: {result.verified} links, head {result.head_hash}"
            )

    def check_anchors(self, path: Path, organisation_ids: list[int] | None) -> None:
        """Each anchor of ``path`` (one JSON object a line, as ``audit_anchor`` prints them) must be
        signed with a key of the keyring, and its chain must still hold, at the anchored number,
        the anchored hash: a chain recomputed after the anchor, with the key or without, does not."""
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise CommandError(f"cannot read the anchors in {path}: {exc.strerror}") from None
        models = {model._meta.label_lower: model for model in chained_models()}
        held = 0
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                entry = None
            if not isinstance(entry, dict) or anchor_unsigned(entry):
                self.broken.add((f"anchor {path}", number))
                self.stdout.write(
                    self.style.ERROR(
                        f"BROKEN  anchor {path}:{number}: not an anchor signed with the audit key (edited?)"
                    )
                )
                continue
            label, partition, seq, anchored = (
                entry["chain"],
                entry["organisation"],
                entry["seq"],
                entry["hash"],
            )
            if organisation_ids is not None and partition not in organisation_ids:
                continue
            model = models.get(label)
            if model is None:
                self.finding(
                    label, partition, f"anchored on {entry['anchored_at']}, but no such chain exists"
                )
                continue
            if seq == 0:
                held += 1
                continue
            stored = link_at(model, partition, seq)
            when = f"anchored on {entry['anchored_at']} ({path}:{number})"
            if stored is None:
                self.finding(label, partition, f"link #{seq} {when} is gone (deleted after the anchor?)")
            elif stored != anchored:
                self.finding(
                    label,
                    partition,
                    f"link #{seq} is not the one {when}: hash {anchored} then, {stored} now; the chain was "
                    "rewritten after the anchor (with the audit key, if its links still verify)",
                )
            else:
                held += 1
        self.stdout.write(f"anchors {path}: {held} hold")
