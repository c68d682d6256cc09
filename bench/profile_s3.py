"""Peak memory of profiling a large Parquet log in S3 against the same file on local disk.

Generates a Parquet log (`--rows` requests: epoch timestamps, input and output tokens, a
model column), uploads it to a real S3 API on loopback (moto's server, IAM enforced:
testkit/s3_server.py), then profiles it twice, each in a fresh process: from the local file
(the baseline) and from `s3://`. Prints each run's peak RSS (the child's ru_maxrss from
wait4) and wall-clock time, and the ratio s3 / local. Both runs take the chunked path
(profiles.stream) once the log has over 4 M rows; the s3 run also streams the object once
through sha256 for `source.digest`.

    python bench/profile_s3.py --rows 20000000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from testkit.s3_server import s3_server  # noqa: E402

_PROFILE = (
    "import sys; from profiles.build import build_profile; "
    "p = build_profile([sys.argv[1]]); print(p.requests, p.source.digest[:12], "
    "p.source.read_in_chunks is not None)"
)


def make_log(path: Path, rows: int, seed: int = 0) -> None:
    """A Parquet log of `rows` requests at about 200 rps, in row groups of 1 M rows, with a
    request id per row (as real logs have; it is what makes the file large: the profiler
    never reads it, but the sha256 of `source.digest` reads every byte)."""
    rng = np.random.default_rng(seed)
    frame = pl.DataFrame(
        {
            "timestamp": 1.7e9 + np.cumsum(rng.exponential(0.005, rows)),
            "input_tokens": rng.integers(1, 8000, rows),
            "output_tokens": rng.integers(1, 2000, rows),
            "model": rng.choice(["a", "b", "c"], rows),
        }
    ).with_columns(pl.int_range(rows).hash(seed).cast(pl.String).alias("request_id"))
    frame.write_parquet(path, row_group_size=1_000_000)


def profile_rss(target: str, env: dict[str, str]) -> tuple[float, float, str]:
    """(peak RSS in MiB, wall seconds, what it printed) of `capplan profile`'s library call on
    `target`, in a process of its own (its own rusage, from wait4)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-c", _PROFILE, target], cwd=ROOT, env=env, stdout=out, stderr=err
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"profiling {target} failed:\n{err.read().decode()[-2000:]}")
        return usage.ru_maxrss / 1024, wall, out.read().decode().strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000, help="requests in the log")
    ap.add_argument("--file", type=Path, default=None, help="an existing Parquet log instead")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="capplan-s3-") as tmp:
        path = args.file or Path(tmp) / "requests.parquet"
        if args.file is None:
            make_log(path, args.rows)
        size_mib = path.stat().st_size / 2**20
        with s3_server() as s3:
            s3.upload_file("logs", "q4/requests.parquet", str(path))
            env = dict(os.environ, **s3.env("reader"))
            results = {}
            for name, target in (("local", str(path)), ("s3", "s3://logs/q4/requests.parquet")):
                results[name] = profile_rss(target, env)
    local, remote = results["local"], results["s3"]
    print(f"log: {args.rows:,} rows, {size_mib:.0f} MiB of Parquet")
    for name, (rss, wall, out) in results.items():
        print(f"{name:>5}: peak RSS {rss:7.0f} MiB, wall-clock {wall:6.1f} s  ({out})")
    print(f"ratio s3 / local peak RSS: {remote[0] / local[0]:.2f} (target: below 2)")


if __name__ == "__main__":
    main()
