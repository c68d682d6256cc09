"""The live members of a process group, read from /proc (a server's stop must end them all)."""

from __future__ import annotations

import time
from pathlib import Path


def live_in_group(pgid: int) -> list[int]:
    """Ids of the processes of group `pgid` that are not zombies."""
    live = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended while we looked
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            live.append(int(stat.parent.name))
    return live


def group_ended(pgid: int, deadline_s: float = 10.0) -> bool:
    """Whether group `pgid` has no live member, polled until `deadline_s` (a killed child may
    take a moment to go)."""
    end = time.monotonic() + deadline_s
    while live_in_group(pgid) and time.monotonic() < end:
        time.sleep(0.05)
    return not live_in_group(pgid)
