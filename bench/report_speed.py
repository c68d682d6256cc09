"""Print how long `render_report` takes (goal: <= 10 s), for English and Chinese.

Builds the test fixture (a one-day profile, a steady-burst-recovery run, a limit, a plan) at
scale 1 and at scale 20 (20x the request rates: about 33,000 records), times loading and
rendering, and prints each next to the baseline of the same run: reading the same inputs
without rendering. Run: `.venv/bin/python bench/report_speed.py`.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reports import render_report  # noqa: E402
from reports.data import load_inputs  # noqa: E402
from testkit.report_inputs import write_fixture  # noqa: E402

GOAL_S = 10.0


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for scale in (1.0, 20.0):
            root = Path(tmp) / f"scale{scale:g}"
            paths = write_fixture(root, scale=scale)
            records = (paths.run_dir / "records.parquet").stat().st_size
            start = time.perf_counter()
            load_inputs(paths.profile, paths.run_dir, paths.plan, previous_plan=paths.previous)
            load_s = time.perf_counter() - start
            for lang in ("en", "zh"):
                start = time.perf_counter()
                pdf = render_report(
                    paths.profile,
                    paths.run_dir,
                    paths.plan,
                    root / f"report-{lang}.pdf",
                    previous_plan=paths.previous,
                    lang=lang,
                )
                render_s = time.perf_counter() - start
                print(
                    f"scale {scale:>4g}  records.parquet {records / 1024:7.0f} KiB  lang {lang}  "
                    f"report {render_s:6.2f} s  (load only {load_s:5.2f} s, ratio "
                    f"{render_s / load_s:5.1f}x)  pdf {pdf.stat().st_size / 1024:5.0f} KiB  "
                    f"goal <= {GOAL_S:g} s: {'met' if render_s <= GOAL_S else 'MISSED'}"
                )


if __name__ == "__main__":
    main()
