"""What stopped a benchmark's process, and when: garbage collections and any pause of the whole
process (a watchdog thread that slept 5 ms and woke later than that: the GIL held by a collection
or by a long stretch of code, or the process waiting for a CPU).

A process installs it with :func:`probe`; each stall of ``threshold_ms`` or more is appended as a
line of JSON to ``path`` as it happens (``{"at": unix time it began, "ms": length, "gc":
generation or null, "pid": the process}``), so a process that is killed loses nothing.
:func:`read` gathers them.
``python bench/_stalls.py STALL_LOG -m module args…`` runs a module (``daphne``) probed.
"""

from __future__ import annotations

import gc
import json
import os
import runpy
import sys
import threading
import time
from pathlib import Path
from typing import Any

TICK = 0.005


def probe(path: str | Path, *, threshold_ms: float = 20.0) -> None:
    """Record this process's stalls of ``threshold_ms`` or more in ``path``."""
    out = open(path, "a", buffering=1)  # noqa: SIM115 - open for the process's lifetime
    started: list[float] = [0.0]

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
            return
        ms = (time.perf_counter() - started[0]) * 1000
        if ms >= threshold_ms:
            out.write(
                json.dumps(
                    {
                        "at": time.time() - ms / 1000,
                        "ms": round(ms, 1),
                        "gc": info["generation"],
                        "pid": os.getpid(),
                    }
                )
                + "\n"
            )

    def watchdog() -> None:
        last = time.perf_counter()
        while True:
            time.sleep(TICK)
            now = time.perf_counter()
            late = (now - last - TICK) * 1000
            if late >= threshold_ms:
                out.write(
                    json.dumps(
                        {
                            "at": time.time() - late / 1000,
                            "ms": round(late, 1),
                            "gc": None,
                            "pid": os.getpid(),
                        }
                    )
                    + "\n"
                )
            last = now

    gc.callbacks.append(on_gc)
    threading.Thread(target=watchdog, daemon=True, name="stall-probe").start()


def read(path: str | Path) -> list[dict[str, Any]]:
    """The stalls recorded in ``path`` (none if the file is missing)."""
    try:
        lines = Path(path).read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def summary(stalls: list[dict[str, Any]]) -> str:
    """``"3 (max 120.4 ms; 2 during a full collection)"`` or ``"none"``."""
    if not stalls:
        return "none"
    full = sum(1 for s in stalls if s["gc"] == 2)
    processes = len({s["pid"] for s in stalls})
    return (
        f"{len(stalls)} in {processes} process{'es' if processes > 1 else ''} "
        f"(max {max(s['ms'] for s in stalls):.1f} ms; {full} during a full collection)"
    )


if __name__ == "__main__":
    log, dash_m, module, *rest = sys.argv[1:]
    assert dash_m == "-m", "usage: _stalls.py STALL_LOG -m module args…"
    sys.path[0] = str(Path.cwd())  # as ``python -m`` would have it, not this file's folder
    probe(log)
    sys.argv = [module, *rest]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
