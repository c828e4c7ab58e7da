"""Pinning a benchmark to one core, shared by the in-process speed benchmarks (imported as a
sibling module: ``python benchmarks/<name>.py`` puts this directory on ``sys.path``)."""

from __future__ import annotations

import os


def pin_to_one_core() -> str:
    """Pin this process to core 0 when the OS allows it; say which, for the benchmark's header."""
    try:
        os.sched_setaffinity(0, {0})
    except (AttributeError, OSError):
        return "not pinned"
    return "pinned to core 0"
