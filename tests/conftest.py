"""How the suite shares two workers (scripts/test.sh runs pytest-xdist with `--dist loadgroup`).

Tests that judge timing against real servers on the wall clock (real HTTP servers, Locust,
nginx, the guides whose walk-through starts a server) run one after another on one worker, as
they did in a single process: the group `wall-clock`, scheduled first because it is the
longest. Every other test file is a group of its own (its module fixtures built once) on
whichever worker is free.
Without xdist the markers do nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

WALL_CLOCK = "wall-clock"
# Files (or folders) whose tests time real servers, beside any test marked `integration`.
WALL_CLOCK_PATHS = ("tests/integration/", "tests/locustfiles/")
# Files whose tests are each a group of their own (long, independent: the guides' walk-throughs
# that start no server).
PER_TEST_PATHS = ("tests/docs/test_guides_run.py",)


def group_of(item: pytest.Item, root: Path) -> str:
    """`wall-clock`, or the test's file relative to the repository (its node id in a
    PER_TEST_PATHS file)."""
    path = Path(str(item.path)).resolve().relative_to(root).as_posix()
    wall = path.startswith(WALL_CLOCK_PATHS) or item.get_closest_marker("integration") is not None
    if wall:
        return WALL_CLOCK
    return item.nodeid if path in PER_TEST_PATHS else path


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(str(config.rootpath)).resolve()
    groups = {id(item): group_of(item, root) for item in items}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[id(item)]))
    items.sort(key=lambda item: groups[id(item)] != WALL_CLOCK)  # stable: wall-clock first
