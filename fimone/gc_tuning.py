"""Garbage collection tuned for long-running servers and workers.

CPython's cyclic collector stops the whole process for a full (generation 2) collection, whose
cost grows with every live container object. A Daphne holding a few hundred WebSockets holds some
200,000, and each full collection then stopped it for 100-400 ms on a 2-core host: every socket's
events waited (bench/stream_fanout.py's p99). Full collections come when enough objects have been
promoted to the old generation since the last one; on a busy server most promoted objects are
short-lived ones (an event's dicts, a request's frames) that a young collection caught alive.

Two standard measures, applied once the application is loaded (:func:`tune_for_server`):
- ``gc.freeze()``: what start-up built (models, URL patterns, settings, imported modules) is never
  garbage; it moves to a permanent generation that no collection scans again;
- a larger young-generation threshold (``GC_THRESHOLD``): short-lived objects die by reference
  counting before a collection promotes them, so far fewer reach the old generation and full
  collections become rare. Cyclic garbage is still collected, only less often.
"""

from __future__ import annotations

import gc


def tune_for_server(threshold: int) -> None:
    """Freeze what exists now and set the young generation's threshold to ``threshold`` (0 leaves
    the collector as CPython configures it). Call once, after the application is loaded."""
    if threshold <= 0:
        return
    gc.collect()  # what start-up left as garbage is not frozen with the rest
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(threshold, middle, old)
