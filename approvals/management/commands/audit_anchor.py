"""Print the signed head of every audit chain, to keep outside the database (docs/design.md §1.15)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from fimone.audit_chain import anchor_entry, canonical_json
from fimone.models import ChainHead

#: How long the anchor store has to take the anchors.
POST_TIMEOUT_SECONDS = 10.0


def anchor_lines() -> list[str]:
    """One signed anchor per chain (every organisation's chain of every chained log), as JSON
    text, in a stable order: where each chain ends now."""
    now = timezone.now()
    heads = ChainHead.objects.order_by("chain", "partition").values_list(
        "chain", "partition", "seq", "entry_hash"
    )
    return [
        canonical_json(
            anchor_entry(chain=chain, partition=partition, seq=seq, entry_hash=entry_hash, anchored_at=now)
        )
        for chain, partition, seq, entry_hash in heads
    ]


class Command(BaseCommand):
    help = (
        "Print the head of every audit chain (organisation, chain, number, hash), signed with a key "
        "derived from AUDIT_CHAIN_KEY, as JSON lines; with --output also append them to a file, and post "
        "them to AUDIT_ANCHOR_URL when it is set. Keep them where whoever can write the database cannot "
        "(a write-once store, a ticket): audit_verify --anchor FILE then finds any chain rewritten since, "
        "even by someone who holds the key."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--output", metavar="FILE", help="Also append the anchors to this file.")

    def handle(self, *args: Any, **options: Any) -> None:
        lines = anchor_lines()
        text = "".join(f"{line}\n" for line in lines)
        self.stdout.write(text, ending="")
        output = options.get("output")
        if output:
            try:
                with Path(output).open("a", encoding="utf-8") as sink:
                    sink.write(text)
            except OSError as exc:
                raise CommandError(f"cannot write the anchors to {output}: {exc.strerror}") from None
        url = settings.AUDIT_ANCHOR_URL
        if url:
            try:
                response = httpx.post(
                    url,
                    content=text.encode("utf-8"),
                    headers={"Content-Type": "application/x-ndjson"},
                    timeout=POST_TIMEOUT_SECONDS,
                )
            except httpx.HTTPError as exc:
                raise CommandError(f"the anchors could not be posted to AUDIT_ANCHOR_URL: {exc}") from None
            if not response.is_success:
                raise CommandError(
                    f"the anchor store at AUDIT_ANCHOR_URL answered HTTP {response.status_code}: not anchored"
                )
            self.stderr.write(f"{len(lines)} anchors posted to AUDIT_ANCHOR_URL")
