"""Memory and accuracy of the prefix statistics past the exact budget (profiles.prefix_bounded).

    python bench/prefix_bounded.py [--requests 1000000] [--keep DIR] [--salts 25]

1. Builds a Mooncake-style trace of --requests requests (testkit/logs.py
   build_mooncake_log: about 27 blocks of 512 tokens a request, so 1 M requests hold about
   27 M block hashes, past the 16 Mi that the exact statistics keep).
2. Profiles it with `capplan profile --chunk-rows 200000` twice, each in a fresh process:
   as shipped (bounded: exact LRU hit ratios up to 16 Mi tokens of cache, sampled beyond),
   and with the exact budget lifted (every hash kept: profiles.prefix, exact). Prints the
   wall time and peak RSS of each, and for every cache size the exact hit ratio, the bounded
   estimate and its bounds, and whether the exact value lies inside them.
3. With --salts S: how often the bounds hold. Four synthetic workloads of 20 k requests
   (testkit/logs.py chained_workload: Zipf-popular system prompts, conversations, fresh
   prompts), each folded S times with its block ids XOR-ed with a random salt (another
   hash sample each time) and a sample thinned to 1/128; prints the share of points outside
   their bounds and the spread of (estimate - exact) in standard errors.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.profile_speed import made_once, run_measured  # noqa: E402

CLI = "import sys; from capplan.cli import main; sys.argv[0] = 'capplan'; main()"
EXACT = (
    "import sys; from profiles import prefix_bounded; prefix_bounded.EXACT_BLOCKS = 1 << 62; " + CLI
)


def build(requests: int, store: Path) -> Path:
    code = (
        "import sys; from pathlib import Path; from testkit.logs import build_mooncake_log; "
        f"print(f'{{build_mooncake_log(Path(sys.argv[1]), {requests}):,}} blocks')"
    )
    return made_once(store / f"mooncake-{requests}.jsonl", code)


def compare(log: Path, folder: Path) -> None:
    runs = {}
    for label, code in (("bounded (as shipped)", CLI), ("exact (every hash kept)", EXACT)):
        out = folder / f"{label.split()[0]}.json"
        cmd = [sys.executable, "-c", code, "profile", str(log), "-o", str(out), "-q"]
        wall, mb, cpu = run_measured([*cmd, "--chunk-rows", "200000"])
        runs[label] = json.loads(out.read_text())
        print(f"{label:26s} {wall:7.1f} s wall, {cpu:7.1f} s CPU, peak RSS {mb:7,.0f} MB")
    bounded, exact = runs["bounded (as shipped)"], runs["exact (every hash kept)"]
    b, e = bounded["prefix"], exact["prefix"]
    info = bounded["source"]["read_in_chunks"]
    how = info["estimated"].get("prefix", "exact")
    print(f"blocks: {e['hashed_tokens'] / e['block_tokens']:,.0f}; {how}")
    bounds = info["bounds"]
    if "prefix.ideal_hit_ratio" in bounds:
        print(f"bounds: {bounds['prefix.ideal_hit_ratio']['method']}")
    truth = {p["cache_tokens"]: p["hit_ratio"] for p in e["lru_hit_ratio"]}
    rows = [
        ("ideal", e["ideal_hit_ratio"], b["ideal_hit_ratio"], bounds.get("prefix.ideal_hit_ratio"))
    ]
    for p in b["lru_hit_ratio"]:
        if p["cache_tokens"] in truth:
            key = f"prefix.lru_hit_ratio[{p['cache_tokens']}]"
            rows.append(
                (p["cache_tokens"], truth[p["cache_tokens"]], p["hit_ratio"], bounds.get(key))
            )
    print("cache tokens      exact   bounded   bounds              inside")
    for size, x, est, bound in rows:
        lo, hi = (bound["low"], bound["high"]) if bound else (est, est)
        inside = "exact" if bound is None else ("yes" if lo <= x <= hi else "NO")
        print(f"{size!s:>12}   {x:.4f}   {est:.4f}   [{lo:.4f}, {hi:.4f}]   {inside}")
    note = info["estimated"].get("prefix.top_prefixes", "exact counts")
    print(f"top prefixes ({note}): (tokens, request share) exact / bounded")
    for x, y in zip(e["top_prefixes"], b["top_prefixes"], strict=False):
        print(
            f"  {x['prefix_tokens']:>7} {x['request_share']:.5f}   "
            f"{y['prefix_tokens']:>7} {y['request_share']:.5f}"
        )
    for k in ("top_prefixes_request_share", "top_prefixes_token_share"):
        print(f"  {k}: {e[k]:.5f} / {b[k]:.5f}")


def coverage(salts: int) -> None:
    from profiles.prefix import prefix_stats
    from profiles.prefix_bounded import LruFold
    from testkit.logs import chained_workload

    bt, sizes = 16, [16 << k for k in range(16)]
    rng = np.random.default_rng(1)
    outside = points = 0
    z = []
    for seed in (1, 2, 100, 207):
        _, flat, lengths, ht = chained_workload(seed, 20_000, bt)
        exact = prefix_stats(flat, lengths, ht, bt, sizes)
        truth = [(exact.ideal_hit_ratio, None)] + [
            (p.hit_ratio, p.cache_tokens) for p in exact.lru_hit_ratio if p.cache_tokens > 512 * bt
        ]
        ends = np.concatenate(([0], np.cumsum(lengths)))
        for _ in range(salts):
            salt = np.uint64(rng.integers(0, 2**63))
            fold = LruFold(
                bt, sizes, near_tokens=512 * bt, window_blocks=20_000, sample_blocks=3000
            )
            for a in range(0, lengths.size, 2000):
                c = min(a + 2000, lengths.size)
                fold.add(flat[ends[a] : ends[c]] ^ salt, lengths[a:c], ht[a:c])
            est = fold.finish()
            for x, size in truth:
                value, low, high = est.ideal if size is None else est.curve[size]
                points += 1
                outside += not low <= x <= high
                if high > low:
                    z.append((value - x) / ((high - low) / 6))
    zs = np.array(z)
    print(
        f"bounds over {points} points (4 workloads x {salts} salts, sample rate "
        f"{est.sample_rate:g}): {outside} outside; (estimate - exact) in sixths of the "
        f"bound's width: mean {zs.mean():+.2f}, sd {zs.std():.2f}, largest {np.abs(zs).max():.2f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--salts", type=int, default=0)
    ap.add_argument("--keep", type=Path, default=None, help="folder to keep the trace in")
    args = ap.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory(prefix="capplan-bench-") as tmp:
        folder = Path(tmp)
        store = args.keep or folder
        store.mkdir(parents=True, exist_ok=True)
        if args.requests > 0:
            compare(build(args.requests, store), folder)
        if args.salts > 0:
            coverage(args.salts)


if __name__ == "__main__":
    main()
