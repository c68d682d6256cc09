"""The one duration reader: seconds from a duration as Prometheus, Locust and Kubernetes write
one (500ms, 90s, 5m, 2h, 7d, 1h30m). Each caller states which units it takes, whether bare
seconds (90) count, and whether parts may be combined largest first (1h30m); the reader
returns seconds or None and the caller words its own refusal (a CLI option, an SLO term, a
Prometheus range)."""

from __future__ import annotations

import math
import re
from collections.abc import Collection

UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
_NUMBER = r"(\d+(?:\.\d*)?|\.\d+)"
_PART = re.compile(_NUMBER + r"(ms|s|m|h|d|w)")
_BARE = re.compile(r"^" + _NUMBER + r"$")


def duration_s(
    text: str, units: Collection[str], *, bare: bool = False, combined: bool = False
) -> float | None:
    """Seconds of `text` (stripped, any case), or None where it is not a duration in `units`
    (a bare number where `bare` is False, parts one after another where `combined` is False,
    parts not largest first, a unit used twice). Negative and non-finite values never read."""
    given = text.strip().lower()
    if _BARE.match(given):
        return float(given) if bare else None
    seconds, end, smallest, parts = 0.0, 0, math.inf, 0
    for match in _PART.finditer(given):
        unit = match.group(2)
        unit_s = UNIT_S[unit]
        if match.start() != end or unit not in units or unit_s >= smallest:
            return None
        seconds += float(match.group(1)) * unit_s
        end, smallest, parts = match.end(), unit_s, parts + 1
    if end == 0 or end != len(given) or (parts > 1 and not combined):
        return None
    return seconds if math.isfinite(seconds) else None
