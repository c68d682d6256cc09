"""Speed of `capplan profile` on a 10-million-request log, against a bare polars floor.

    python bench/profile_speed.py [--rows 10000000] [--text-requests 2000] [--shards K]

1. Generates a Parquet log (arrival, input, output, session) of --rows requests.
2. Runs, each in its own process, (a) the floor: a bare polars scan that reads the same four
   columns and computes their means, and (b) `capplan profile` on the file; prints wall time
   and peak RSS of each and the ratios (goal: <= 2x the floor's time, <= 3 GB peak RSS).
With --shards K, also splits the log by time into K Parquet files, profiles each in its own
process and merges them (`capplan profile --merge`): the way to profile a quarter of logs
with memory bounded by one shard; prints the total wall time and the largest peak RSS.
3. Prints prefix-hashing throughput (prompt tokens per second) for an OpenAI-style text log:
   the whole reader (JSON, tokenizing, chained block hashes) and the hashing step alone.
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FLOOR = """
import sys, polars as pl
df = pl.scan_parquet(sys.argv[1]).select(
    pl.col("arrival").mean(), pl.col("input").mean(), pl.col("output").mean(),
    pl.col("session").str.len_bytes().mean(),
).collect()
print(df)
"""
PROFILE = "import sys; from planner.cli import main; sys.argv[0] = 'capplan'; main()"
LIBRARY = """
import sys
from profiles.build import build_profile
from profiles.model import save_profile
cols = "arrival=arrival,input=input,output=output,session=session"
p = build_profile([sys.argv[1]], columns=cols)
save_profile(p, sys.argv[2])
"""


def generate(path: Path | str, rows: int, seed: int = 0) -> None:
    """A day of Poisson-ish traffic with a daily cycle; lognormal lengths; sessions."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(86400.0 / rows, size=rows)
    arrival = 1_700_000_000.0 + np.cumsum(gaps)
    inputs = np.minimum(rng.lognormal(6.8, 0.9, size=rows), 128_000).astype(np.int64)
    outputs = np.minimum(rng.lognormal(4.9, 0.8, size=rows), 8192).astype(np.int64)
    session = rng.integers(0, rows // 5, size=rows)
    pl.DataFrame(
        {
            "arrival": arrival,
            "input": inputs,
            "output": outputs,
            "session": pl.Series(session).cast(pl.String).str.pad_start(9, "0"),
        }
    ).write_parquet(path, row_group_size=1 << 20)


def sharded(log: Path, folder: Path, shards: int, columns: str) -> None:
    """Profile `log` as `shards` time slices, one process each, then merge the partial profiles."""
    in_child(
        f"import polars as pl; f = pl.read_parquet({str(log)!r}); size = -(-f.height // {shards})\n"
        f"for i in range({shards}): "
        f"f.slice(i * size, size).write_parquet({str(folder)!r} + f'/shard-{{i}}.parquet')"
    )
    wall = cpu = 0.0
    peak = 0.0
    for i in range(shards):
        cmd = [sys.executable, "-c", PROFILE, "profile", str(folder / f"shard-{i}.parquet")]
        cmd += ["-o", str(folder / f"day-{i}.json"), "--columns", columns, "-q"]
        w, mb, c = run_measured(cmd)
        wall, cpu, peak = wall + w, cpu + c, max(peak, mb)
    parts = [str(folder / f"day-{i}.json") for i in range(shards)]
    merge = [sys.executable, "-c", PROFILE, "profile", "--merge", *parts]
    w, mb, c = run_measured([*merge, "-o", str(folder / "merged.json"), "-q"])
    print(
        f"{shards} shards profiled one after another: {wall:.2f} s wall, {cpu:.2f} s CPU, "
        f"largest peak RSS {peak:.0f} MB; merge {w:.2f} s, peak RSS {mb:.0f} MB"
    )


def in_child(code: str) -> None:
    """Run `code` in a fresh process: a child forked from a parent that held a large table
    would report the parent's resident memory as its own peak RSS (Linux keeps it over exec)."""
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)


def best_of(n: int, cmds: list[list[str]]) -> list[tuple[float, float, float]]:
    """Per command, the fastest wall time, the largest peak RSS and the least CPU time of `n` runs.

    The commands take turns (a, b, c, a, b, c, ...) so that a busy spell on a shared machine
    falls on all of them alike.
    """
    runs: list[list[tuple[float, float, float]]] = [[] for _ in cmds]
    for _ in range(n):
        for i, cmd in enumerate(cmds):
            runs[i].append(run_measured(cmd))
    return [(min(r[0] for r in rs), max(r[1] for r in rs), min(r[2] for r in rs)) for rs in runs]


def run_measured(cmd: list[str]) -> tuple[float, float, float]:
    """(wall seconds, peak RSS in MB, CPU seconds) of a child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=REPO)
    out = proc.stdout.read().decode() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{out}")
    return wall, usage.ru_maxrss / 1024.0, usage.ru_utime + usage.ru_stime


def text_throughput(n_requests: int, folder: Path) -> None:
    from bench.kit.logs import build_openai_log
    from profiles.readers import read_requests
    from profiles.tokenize import ApproxTokenizer, chained_block_hashes

    path, _, _ = build_openai_log(folder, n=n_requests, seed=2, usage=False)
    t0 = time.perf_counter()
    r = read_requests([str(path)])
    wall = time.perf_counter() - t0
    tokens = int(r.frame["hash_tokens"].sum())
    print(
        f"text log, whole reader (JSON + tokenize + hash; 3 shared system prompts, tokenized "
        f"once each): {n_requests} requests, "
        f"{tokens:,} prompt tokens in {wall:.2f} s = {tokens / wall:,.0f} tokens/s"
    )
    tok = ApproxTokenizer()
    ids = tok.encode(" ".join(["lorem ipsum dolor sit amet"] * 40_000))
    t0 = time.perf_counter()
    chained_block_hashes(ids, 16)
    wall = time.perf_counter() - t0
    print(f"chained block hashing alone (16-token blocks): {len(ids) / wall:,.0f} tokens/s")
    t0 = time.perf_counter()
    tok.encode(" ".join(["lorem ipsum dolor sit amet"] * 40_000))
    wall = time.perf_counter() - t0
    print(f"approximate tokenizer alone: {len(ids) / wall:,.0f} tokens/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--text-requests", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5, help="runs of each; the fastest counts")
    ap.add_argument("--shards", type=int, default=0, help="also profile K time shards + merge")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="capplan-bench-") as tmp:
        folder = Path(tmp)
        log = folder / "log.parquet"
        t0 = time.perf_counter()
        in_child(f"from bench.profile_speed import generate; generate({str(log)!r}, {args.rows})")
        size_mb = log.stat().st_size / 1e6
        print(
            f"generated {args.rows:,} requests ({size_mb:.0f} MB Parquet) "
            f"in {time.perf_counter() - t0:.1f} s"
        )
        cmd = [
            sys.executable,
            "-c",
            PROFILE,
            "profile",
            str(log),
            "-o",
            str(folder / "p.json"),
            "--columns",
            "arrival=arrival,input=input,output=output,session=session",
            "-q",
        ]
        lib = [sys.executable, "-c", LIBRARY, str(log), str(folder / "q.json")]
        floor = [sys.executable, "-c", FLOOR, str(log)]
        (floor_s, floor_mb, floor_cpu), (prof_s, prof_mb, prof_cpu), (lib_s, lib_mb, lib_cpu) = (
            best_of(args.repeat, [floor, cmd, lib])
        )
        print(
            f"best of {args.repeat} runs each, every run in a fresh process; "
            f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
        )
        for label, wall, mb, cpu in (
            ("floor (bare polars scan + means)", floor_s, floor_mb, floor_cpu),
            ("capplan profile", prof_s, prof_mb, prof_cpu),
            ("build_profile() + save (library)", lib_s, lib_mb, lib_cpu),
        ):
            print(f"{label:34s} {wall:6.2f} s wall, {cpu:6.2f} s CPU, peak RSS {mb:6.0f} MB")
        print(
            f"ratio: {prof_s / floor_s:.2f}x the floor's time (goal <= 2x); peak RSS "
            f"{prof_mb / 1024:.2f} GB (goal <= 3 GB)"
        )
        print(
            f"library ratio (without the CLI's start-up: typer, rich and the command's options): "
            f"{lib_s / floor_s:.2f}x; CPU-time ratios {prof_cpu / floor_cpu:.2f}x (CLI), "
            f"{lib_cpu / floor_cpu:.2f}x (library)"
        )
        if args.shards:
            sharded(log, folder, args.shards, cmd[cmd.index("--columns") + 1])
        text_throughput(args.text_requests, folder)


if __name__ == "__main__":
    main()
