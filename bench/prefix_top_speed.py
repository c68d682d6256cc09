"""Time and peak memory of the top-prefix fold (profiles.prefix_top) on synthetic chained blocks.

    python bench/prefix_top_speed.py [--blocks 10000000] [--run-blocks 1000000]
        [--capacity 1048576,65536]

The log: requests of 1..20 blocks of random tail hashes, 80 % of them behind one of 50 system
prompts of 1..40 blocks (10 M blocks: about 370 k requests). Each configuration runs in its own
process: the fold over runs of about --run-blocks blocks at each --capacity, and one run of the
whole log; it prints wall time, ns a block, the peak memory the fold allocates (tracemalloc, which
numpy reports its buffers to; the log's own arrays excluded) and that per block of the largest
run, the table's nodes and count_error.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = """
import sys, time, tracemalloc
import numpy as np
from profiles.prefix_top import TopPrefixFold
blocks, run_blocks, capacity = (int(a) for a in sys.argv[1:4])
rng = np.random.default_rng(0)
n_req = int(blocks / 26.9)  # 0.8 x 20.5 prompt + 10.5 tail blocks a request
system = rng.integers(1, 41, size=50)
base = np.concatenate(([0], np.cumsum(system)[:-1]))
which = rng.integers(0, 50, size=n_req)
behind = rng.random(n_req) < 0.8
prompt = np.where(behind, system[which], 0)
lengths = (prompt + rng.integers(1, 21, size=n_req)).astype(np.int64)
flat = rng.integers(1 << 20, 2**64, size=int(lengths.sum()), dtype=np.uint64)
starts = np.cumsum(lengths) - lengths
pos = np.arange(flat.size) - np.repeat(starts, lengths)
in_prompt = pos < np.repeat(prompt, lengths)
flat[in_prompt] = (np.repeat(base[which], lengths) + pos)[in_prompt].astype(np.uint64)
del pos, in_prompt
hash_tokens = lengths * 16
cuts = np.searchsorted(np.cumsum(lengths), np.arange(run_blocks, flat.size, run_blocks))
cuts = np.unique(np.concatenate(([0], cuts + 1, [n_req])))
tracemalloc.start()  # numpy reports its buffers to it: the peak of what the fold allocates
fold = TopPrefixFold(capacity)
t0 = time.perf_counter()
for a, b in zip(cuts[:-1], cuts[1:]):
    fold.add(flat[starts[a]:starts[a] + lengths[a:b].sum()], lengths[a:b], hash_tokens[a:b], 16)
top, req_share, tok_share, error = fold.finish(n_req, float(hash_tokens.sum()))
wall = time.perf_counter() - t0
grown = tracemalloc.get_traced_memory()[1]
largest = max(int(lengths[a:b].sum()) for a, b in zip(cuts[:-1], cuts[1:]))
print(f"{flat.size:>11,} blocks  runs of <= {largest:>11,}  capacity {capacity:>9,}: "
      f"{wall:6.2f} s = {wall / flat.size * 1e9:5.0f} ns/block; peak +{grown / 2**20:5.0f} MB "
      f"= {grown / largest:3.0f} B/block of a run; {len(fold):,} nodes kept, "
      f"count_error {error:,}; "
      f"top {top[0].prefix_tokens} tokens x {top[0].request_share:.3f} of requests, "
      f"shares {req_share:.3f} / {tok_share:.3f}")
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--blocks", type=int, default=10_000_000)
    ap.add_argument("--run-blocks", type=int, default=1_000_000)
    ap.add_argument("--capacity", default=f"{1 << 20},{1 << 16}")
    args = ap.parse_args()
    configs = [(args.run_blocks, int(c)) for c in args.capacity.split(",")]
    configs.append((args.blocks, 1 << 20))  # the whole log in one run, as the in-memory path
    for run_blocks, capacity in configs:
        cmd = [sys.executable, "-c", CHILD, str(args.blocks), str(run_blocks), str(capacity)]
        subprocess.run(cmd, check=True, cwd=REPO)


if __name__ == "__main__":
    main()
