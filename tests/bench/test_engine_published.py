"""bench/engine_published.py reads any table of the published format and writes one JSON
record per row: predicted and error, or why the row cannot be represented."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIELDS = ("source", "engine", "gpu", "precision", "model", "tp", "workload", "metric",
          "published", "reference")  # fmt: skip


def test_any_table_in_the_format_gives_one_record_per_row(tmp_path: Path) -> None:
    table = tmp_path / "mine.csv"
    rows = [
        ("t", "TensorRT-LLM 0.14", "H100-80GB", "FP16", "llama-3.1-8b", 1,
         "offline fixed 128/128", "output tok/s", 15571.6549, "perf-overview"),
        ("t", "TensorRT-LLM 0.14", "H100-80GB", "FP16", "llama-3.1-8b", 1,
         "offline fixed 128/128", "power W", 700, "made up: no such metric"),
    ]  # fmt: skip
    with table.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(FIELDS)
        w.writerows(rows)
    out = tmp_path / "out.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench/engine_published.py"), str(table), "--json",
         str(out), "--max-requests", "200", "--jobs", "1"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = json.loads(out.read_text())
    assert len(records) == 2
    ok, missing = records
    assert ok["role"] == "check" and ok["metric"] == "output tok/s"
    assert ok["error"] == ok["predicted"] / ok["published"] - 1
    assert "why_not" in missing and "power W" in missing["why_not"]
    assert "1 rows not represented" in done.stdout
