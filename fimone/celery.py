"""The Celery app, configured from Django settings (``CELERY_*``)."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_init, worker_process_init
from django.conf import settings

from fimone.gc_tuning import tune_for_server

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fimone.settings")

app = Celery("fimone")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
@worker_process_init.connect
def _tune_gc(**_: object) -> None:
    """The worker's main process before it starts its pool, and each pool process once loaded:
    see fimone/gc_tuning.py. The main process hands every task to the pool; untuned, its full
    collections (some 100-150 ms on a 2-core host) held up a resume after an approval."""
    tune_for_server(settings.GC_THRESHOLD)
