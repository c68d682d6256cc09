"""Which tests time real servers on the wall clock: marked `wall_clock` here.

scripts/test.sh runs the suite as two pytest processes side by side on the two cores: one
runs the `wall_clock` tests one after another, as a single process did (real HTTP servers,
Locust, nginx, the guides whose walk-through starts a server: they judge timing and some
bind fixed ports), the other runs everything else (`-m "not wall_clock"`), which only uses
the CPU. A test is `wall_clock` when it lives under WALL_CLOCK_PATHS or is marked
`integration`.

The CPU-only tests take about half the wall-clock ones' time, so the wall-clock files under
SECOND_LANE_PATHS (also `second_lane`) run after them in their process: each binds only free
ports (no fixed port a guide uses), and they ran beside the CPU-only tests before without a
timing failure. The two lanes then end within about a minute of each other.
"""

from __future__ import annotations

from pathlib import Path

import pytest

WALL_CLOCK_PATHS = ("tests/integration/", "tests/locustfiles/")
# about 6.5 minutes of the 23 the wall-clock tests took one after another (CI of 2026-12-06)
SECOND_LANE_PATHS = (
    "tests/integration/test_limit_emulator.py",
    "tests/integration/test_verify_slots.py",
)


def is_wall_clock(item: pytest.Item, root: Path) -> bool:
    path = Path(str(item.path)).resolve().relative_to(root).as_posix()
    return path.startswith(WALL_CLOCK_PATHS) or item.get_closest_marker("integration") is not None


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(str(config.rootpath)).resolve()
    for item in items:
        if is_wall_clock(item, root):
            item.add_marker(pytest.mark.wall_clock)
            path = Path(str(item.path)).resolve().relative_to(root).as_posix()
            if path in SECOND_LANE_PATHS:
                item.add_marker(pytest.mark.second_lane)
