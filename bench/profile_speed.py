"""Speed and memory of `capplan profile` on large logs, against a bare polars floor.

    python bench/profile_speed.py [--rows 10000000[,30000000,100000000]] [--repeat 5]
        [--keep DIR] [--text-requests 2000] [--text-log N] [--shards K] [--breakdown]

1. Generates a Parquet log (arrival, input, output, session) of each --rows size (in parts of
   10 M rows, so 100 M rows take bounded memory; with --keep DIR the logs stay there and later
   runs reuse them).
2. Runs, each in its own process, (a) the floor: a bare polars scan that reads the same four
   columns and computes their means, and (b) `capplan profile` on the file; prints wall time,
   CPU time and peak RSS of each and the ratios. Goals: <= 2x the floor's time at every size,
   peak RSS <= 4 GB at 100 M rows and flat in N (a log over 4 M rows is profiled in chunks of
   1 M rows, profiles.stream), time linear in N (the us/row column of the summary).
With --shards K, also splits the log by time into K Parquet files, profiles each in its own
process and merges them (`capplan profile --merge`); prints the total wall time and the
largest peak RSS.
With --breakdown, also prints where the time goes, phase by phase, in one process (see
`breakdown`).
3. Prints prefix-hashing throughput (prompt tokens per second) for an OpenAI-style text log:
   the whole reader (JSON, tokenizing, chained block hashes) and the hashing step alone.
With --text-log N, also profiles an OpenAI-style log of N requests whole and in chunks of
N/10 (wall time, peak RSS) and prints the prefix statistics' peak memory per block.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

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
COLUMNS = "arrival=arrival,input=input,output=output,session=session"
PROFILE = "import sys; from capplan.cli import main; sys.argv[0] = 'capplan'; main()"
LIBRARY = """
import os, sys
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as `capplan` sets it (capplan/cli.py)
from profiles.build import build_profile
from profiles.model import save_profile
cols = "arrival=arrival,input=input,output=output,session=session"
p = build_profile([sys.argv[1]], columns=cols)
save_profile(p, sys.argv[2])
"""


GENERATE_PART_ROWS = 10_000_000


def generate(path: Path | str, rows: int, seed: int = 0) -> None:
    """A day of Poisson-ish traffic with a daily cycle; lognormal lengths; sessions.

    Written in parts of GENERATE_PART_ROWS rows and joined by polars' streaming sink, so a
    100-million-row log is made in bounded memory (about 1 GB on disk at that size).
    """
    rng = np.random.default_rng(seed)
    parts = []
    start = 1_700_000_000.0
    folder = Path(tempfile.mkdtemp(prefix="capplan-gen-", dir=Path(path).parent))
    for first in range(0, rows, GENERATE_PART_ROWS):
        n = min(GENERATE_PART_ROWS, rows - first)
        arrival = start + np.cumsum(rng.exponential(86400.0 / rows, size=n))
        start = float(arrival[-1])
        inputs = np.minimum(rng.lognormal(6.8, 0.9, size=n), 128_000).astype(np.int64)
        outputs = np.minimum(rng.lognormal(4.9, 0.8, size=n), 8192).astype(np.int64)
        session = rng.integers(0, rows // 5, size=n)
        part = folder / f"part-{len(parts):04d}.parquet"
        pl.DataFrame(
            {
                "arrival": arrival,
                "input": inputs,
                "output": outputs,
                "session": pl.Series(session).cast(pl.String).str.pad_start(9, "0"),
            }
        ).write_parquet(part, row_group_size=1 << 20)
        parts.append(part)
    if len(parts) == 1:
        parts[0].replace(path)
    else:
        pl.scan_parquet(parts).sink_parquet(path, row_group_size=1 << 20)
        for part in parts:
            part.unlink()
    folder.rmdir()


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


def in_child(code: str, *args: str) -> None:
    """Run `code` in a fresh process: a child forked from a parent that held a large table
    would report the parent's resident memory as its own peak RSS (Linux keeps it over exec)."""
    subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, check=True)


def cache_bytecode(folder: Path) -> None:
    """Let the children this process starts cache their compiled bytecode, in `folder`.

    An installed package runs from bytecode compiled at install time, and an editable install
    (`pip install -e .`) writes it beside the sources at the first run. Where the environment
    sets PYTHONDONTWRITEBYTECODE (as some sandboxes and containers do), every run would
    compile capplan's own modules anew, which no user's run does: about 50 ms here. Compiled
    files go to a folder of the benchmark's own (PYTHONPYCACHEPREFIX), not into the sources.
    """
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(folder)


class Timing(NamedTuple):
    """A command's runs: the fastest wall time, the largest peak RSS, the least CPU time, and
    every run's wall and CPU times in the order they ran."""

    wall: float
    mb: float
    cpu: float
    walls: tuple[float, ...]
    cpus: tuple[float, ...]

    def paired(self, base: Timing) -> tuple[float, float]:
        """The medians of this command's wall and CPU times over `base`'s, run by run: each
        run against the `base` run of the same turn, just before it. A slow spell on a shared
        machine slows both runs of a turn alike, where the ratio of the fastest runs is set by
        each command's single luckiest run."""
        return (
            statistics.median(a / b for a, b in zip(self.walls, base.walls, strict=True)),
            statistics.median(a / b for a, b in zip(self.cpus, base.cpus, strict=True)),
        )


def best_of(n: int, cmds: list[list[str]], warm_up: bool = True) -> list[Timing]:
    """The Timing of each command over `n` runs.

    With `warm_up`, one untimed run of each first (it compiles the bytecode and reads the file
    into the page cache). The commands take turns (a, b, c, a, b, c, ...) so that a busy spell
    on a shared machine falls on all of them alike.
    """
    if warm_up:
        for cmd in cmds:
            run_measured(cmd)
    runs: list[list[tuple[float, float, float]]] = [[] for _ in cmds]
    for _ in range(n):
        for i, cmd in enumerate(cmds):
            runs[i].append(run_measured(cmd))
    return [
        Timing(
            min(r[0] for r in rs),
            max(r[1] for r in rs),
            min(r[2] for r in rs),
            tuple(r[0] for r in rs),
            tuple(r[2] for r in rs),
        )
        for rs in runs
    ]


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


BREAKDOWN = """
import os, resource, sys, time
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as `capplan` sets it (capplan/cli.py)
def now():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return time.perf_counter(), r.ru_utime + r.ru_stime
def show(label, t0, extra=""):
    w, c = now()
    print(f"  {label:44s} {w - t0[0]:6.2f} s wall {c - t0[1]:6.2f} s CPU{extra}", flush=True)
    return w, c
t = now()
import polars as pl
t = show("import polars", t)
from pathlib import Path
from profiles.readers import reader_context
from profiles.readers.base import files_digest
from profiles.readers.chunks import read_table_chunks
from profiles.stream import CHUNK_ROWS, profile_in_chunks
from profiles.model import save_profile
import capplan.commands.profile
t = show("import the profile command's modules", t)
log = Path(sys.argv[1])
COLUMNS = sys.argv[3]
t = now()
pl.scan_parquet(log).select(
    pl.col("arrival").mean(), pl.col("input").mean(), pl.col("output").mean(),
    pl.col("session").str.len_bytes().mean(),
).collect()
t = show("floor: bare scan + means (file cached)", t)
files_digest([log])
t = show("sha256 of the file (alone)", t)
ctx = reader_context("auto", COLUMNS, None, 16, "auto", ())
chunks = read_table_chunks(log, ctx, "table", CHUNK_ROWS)
n = sum(f.frame.height for f in chunks)
t = show("read + row checks (alone, no folds)", t, f"  ({n:,} rows)")
phases = {}
p = profile_in_chunks([str(log)], columns=COLUMNS, phase_s=phases)
t = show("profile_in_chunks (all, overlapped)", t)
for k, v in phases.items():
    print(f"    {k:42s} {'':6s}        {v:6.2f} s CPU on the main thread")
save_profile(p, sys.argv[2])
show("write the profile JSON", t)
"""


def breakdown(log: Path, folder: Path) -> None:
    """Where `capplan profile`'s time goes, phase by phase, in one fresh process: imports, the
    floor's scan, the file's sha256, reading and checking the rows alone, then the whole
    chunked profile (read on a worker thread while the main thread folds, sha256 on another)
    with the main thread's time per phase, and writing the JSON. Phases run one after another
    here, so their sum exceeds the real run's wall time (which overlaps them)."""
    print(f"breakdown of {log.name} (one process; the file is in the page cache):")
    in_child(BREAKDOWN, str(log), str(folder / "bd.json"), COLUMNS)


def text_throughput(n_requests: int, folder: Path) -> None:
    from profiles.readers import read_requests
    from profiles.tokenize import ApproxTokenizer, chained_block_hashes
    from testkit.logs import build_openai_log

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


PREFIX_MEMORY = """
import resource, sys, time
import numpy as np
from profiles.prefix import prefix_stats
rng = np.random.default_rng(0)
n_req = int(sys.argv[1]) // 10
lengths = rng.integers(1, 20, size=n_req).astype(np.int64)  # 10 blocks a request on average
flat = rng.integers(0, 2**63, size=int(lengths.sum()), dtype=np.uint64)
firsts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
flat[firsts] = rng.integers(0, 50, size=n_req).astype(np.uint64)  # 50 shared first blocks
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
p = prefix_stats(flat, lengths, lengths * 16, 16, None)
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
print(f"prefix statistics of {flat.size:,} blocks: {time.perf_counter() - t0:.2f} s, peak RSS "
      f"+{grown / 2**20:,.0f} MB = {grown / flat.size:.0f} bytes a block")
"""


PREFIX_BLOCKS = 10_000_000


def text_log_memory(n_requests: int, folder: Path) -> None:
    """Wall time and peak RSS of `capplan profile` on an OpenAI-style log with prompt text
    (testkit/logs.py), read whole and in chunks of a tenth of it; then the prefix
    statistics' own peak memory per block on PREFIX_BLOCKS synthetic blocks."""
    # Built in a child: the parent's resident memory would count as each later child's peak.
    in_child(
        "import sys; from pathlib import Path; from testkit.logs import build_openai_log; "
        "build_openai_log(Path(sys.argv[1]), n=int(sys.argv[2]), seed=3)",
        str(folder),
        str(n_requests),
    )
    path = folder / "openai_3.jsonl"
    out = folder / "text.json"
    cmd = [sys.executable, "-c", PROFILE, "profile", str(path), "-o", str(out), "-q"]
    chunk = str(max(n_requests // 10, 1))
    whole, chunked = best_of(1, [cmd, [*cmd, "--chunk-rows", chunk]], warm_up=False)
    w_s, w_mb, c_s, c_mb = whole.wall, whole.mb, chunked.wall, chunked.mb
    prefix = json.loads(out.read_text())["prefix"]
    blocks = prefix["hashed_tokens"] / prefix["block_tokens"]
    print(
        f"text log of {n_requests:,} requests ({path.stat().st_size / 1e6:,.0f} MB, about "
        f"{blocks:,.0f} blocks): whole {w_s:.1f} s, {w_mb:,.0f} MB peak RSS; "
        f"--chunk-rows {chunk}: {c_s:.1f} s, {c_mb:,.0f} MB"
    )
    in_child(PREFIX_MEMORY, str(PREFIX_BLOCKS))


def measure(log: Path, folder: Path, repeat: int, lib_too: bool) -> dict[str, Timing]:
    """The Timing over `repeat` runs of the floor, the CLI and the library."""
    cmd = [sys.executable, "-c", PROFILE, "profile", str(log), "-o", str(folder / "p.json")]
    cmd += ["--columns", COLUMNS, "-q"]
    runs = {"floor": [sys.executable, "-c", FLOOR, str(log)], "cli": cmd}
    if lib_too:
        runs["lib"] = [sys.executable, "-c", LIBRARY, str(log), str(folder / "q.json")]
    return dict(zip(runs, best_of(repeat, list(runs.values())), strict=True))


def log_of(rows: int, folder: Path) -> Path:
    """The generated log of `rows` requests in `folder`, made once and reused."""
    code = f"import sys; from bench.profile_speed import generate; generate(sys.argv[1], {rows})"
    return made_once(folder / f"log-{rows}.parquet", code)


def made_once(log: Path, code: str) -> Path:
    """`log`, made by `code` (given its path as sys.argv[1]) in a child unless it exists."""
    if log.is_file():
        print(f"reusing {log} ({log.stat().st_size / 1e6:.0f} MB)")
        return log
    t0 = time.perf_counter()
    in_child(code, str(log))
    print(f"made {log} ({log.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t0:.1f} s")
    return log


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--rows", default="10000000", help="requests per log; several sizes comma-separated"
    )
    ap.add_argument("--text-requests", type=int, default=2000)
    ap.add_argument(
        "--text-log",
        type=int,
        default=0,
        help="also profile an OpenAI-style log of this many requests whole and in chunks "
        "(wall time, peak RSS) and measure the prefix statistics' memory per block",
    )
    ap.add_argument("--repeat", type=int, default=5, help="runs of each; the fastest counts")
    ap.add_argument("--shards", type=int, default=0, help="also profile K time shards + merge")
    ap.add_argument("--breakdown", action="store_true", help="also print the time of each phase")
    ap.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="folder for the generated logs, kept and reused by later runs (default: a "
        "temporary folder, deleted at the end)",
    )
    args = ap.parse_args()
    sizes = [int(float(r)) for r in str(args.rows).split(",")]
    with tempfile.TemporaryDirectory(prefix="capplan-bench-") as tmp:
        folder = Path(tmp)
        cache_bytecode(folder / "pycache")
        store = args.keep or folder
        store.mkdir(parents=True, exist_ok=True)
        table = []
        for rows in sizes:
            log = log_of(rows, store)
            got = measure(log, folder, args.repeat, lib_too=len(sizes) == 1)
            floor, prof = got["floor"], got["cli"]
            floor_s, floor_mb, floor_cpu = floor.wall, floor.mb, floor.cpu
            prof_s, prof_mb, prof_cpu = prof.wall, prof.mb, prof.cpu
            print(
                f"{rows:,} rows, best of {args.repeat} runs each after one untimed, every run in "
                f"a fresh process (bytecode cached); load average {os.getloadavg()[0]:.1f} on "
                f"{os.cpu_count()} CPUs"
            )
            for label, key in (
                ("floor (bare polars scan + means)", "floor"),
                ("capplan profile", "cli"),
                ("build_profile() + save (library)", "lib"),
            ):
                if key in got:
                    t = got[key]
                    print(
                        f"{label:34s} {t.wall:6.2f} s wall, {t.cpu:6.2f} s CPU, peak RSS "
                        f"{t.mb:6.0f} MB (medians {statistics.median(t.walls):.2f} s, "
                        f"{statistics.median(t.cpus):.2f} s)"
                    )
            print(
                f"ratio: {prof_s / floor_s:.2f}x the floor's wall time, "
                f"{prof_cpu / floor_cpu:.2f}x its CPU time (goal <= 2x); "
                f"peak RSS {prof_mb / 1024:.2f} GB (goal <= 4 GB, flat)"
            )
            paired_wall, paired_cpu = prof.paired(floor)
            print(
                f"run by run (each profile run over the floor run of its turn), median: "
                f"{paired_wall:.2f}x wall, {paired_cpu:.2f}x CPU"
            )
            if "lib" in got:
                lib_s, lib_cpu = got["lib"].wall, got["lib"].cpu
                print(
                    f"library ratio (without the CLI's start-up: typer, rich and the command's "
                    f"options): {lib_s / floor_s:.2f}x wall, {lib_cpu / floor_cpu:.2f}x CPU"
                )
            table.append(
                (rows, floor_s, floor_cpu, floor_mb, prof_s, prof_cpu, prof_mb, paired_wall)
            )
            if args.shards:
                sharded(log, folder, args.shards, COLUMNS)
            if args.breakdown:
                breakdown(log, folder)
        if len(table) > 1:
            print(
                "\nrows         floor s (CPU)    profile s (CPU)   ratio wall/CPU   "
                "run by run  peak RSS MB  us/row"
            )
            for rows, fs, fc, fm, ps, pc, pm, pw in table:
                print(
                    f"{rows:>11,}  {fs:6.2f} ({fc:6.2f})  {ps:6.2f} ({pc:6.2f})    "
                    f"{ps / fs:4.2f}x / {pc / fc:4.2f}x   {pw:4.2f}x       {fm:5.0f} / {pm:5.0f}  "
                    f"{ps / rows * 1e6:.3f}"
                )
        if args.text_requests > 0:
            text_throughput(args.text_requests, folder)
        if args.text_log > 0:
            text_log_memory(args.text_log, folder)


if __name__ == "__main__":
    main()
