"""The planner's process never imports Locust: Locust monkey-patches the standard library
(gevent) on import, after which a thread's asyncio loop and the caller's share one OS thread
and `asyncio.run` fails. Locust runs in its own processes (planner.loadtest.processes)."""

from __future__ import annotations

import subprocess
import sys


def test_the_cli_and_the_limit_search_do_not_import_locust() -> None:
    code = (
        "import sys, capplan.cli, planner.loadtest.run, planner.limit.run, capplan.demo, reports; "
        "print('locust' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
