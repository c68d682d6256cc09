"""bench/server_closed.py runs NIM's published closed-loop FP8 table through the engine model:
one record per row and metric, and the KV cache's dtype decides where throughput stops rising."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, kv: str) -> list[dict]:
    out = tmp_path / f"{kv}.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench/server_closed.py"), "--json", str(out),
         "--kv-cache-dtype", kv],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


def test_each_row_is_checked_and_an_fp8_kv_cache_holds_twice_the_users(tmp_path: Path) -> None:
    fp8, bf16 = _run(tmp_path, "fp8"), _run(tmp_path, "auto")
    assert len(fp8) == 8 * 3  # 8 concurrencies x (TTFT, ITL, output tok/s)
    for r in fp8:
        assert r["error"] == r["predicted"] / r["published"] - 1
    # The published TTFT jumps at 100, 150 and 200 users: the limit rows, each with a ratio.
    limits = [r for r in fp8 if r["limit_row"]]
    assert [r["row"].split(" x")[1].split()[0] for r in limits] == ["100", "150", "200"]
    assert all(r["limit_ratio"] > 0 for r in limits)

    def plateau(records: list[dict]) -> float:
        return next(r["predicted"] for r in records if r["row"].endswith("x250 users output tok/s"))

    # 70B at 5,500 tokens a request: an fp8 KV cache holds about twice the requests a bf16
    # one does on the same two H100s, so the saturated instance delivers more tokens/s.
    assert plateau(fp8) > 1.2 * plateau(bf16)
