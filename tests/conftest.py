"""Which tests time real servers on the wall clock: marked `wall_clock` here.

scripts/test.sh runs the suite as two pytest processes side by side on the two cores: one
runs the `wall_clock` tests one after another, as a single process did (real HTTP servers,
Locust, nginx, the guides whose walk-through starts a server: they judge timing and some
bind fixed ports), the other runs everything else (`-m "not wall_clock"`), which only uses
the CPU. A test is `wall_clock` when it lives under WALL_CLOCK_PATHS or is marked
`integration`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

WALL_CLOCK_PATHS = ("tests/integration/", "tests/locustfiles/")


def is_wall_clock(item: pytest.Item, root: Path) -> bool:
    path = Path(str(item.path)).resolve().relative_to(root).as_posix()
    return path.startswith(WALL_CLOCK_PATHS) or item.get_closest_marker("integration") is not None


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(str(config.rootpath)).resolve()
    for item in items:
        if is_wall_clock(item, root):
            item.add_marker(pytest.mark.wall_clock)
