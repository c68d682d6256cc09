"""Vector reductions that stay on the calling thread (no BLAS thread pool)."""

from __future__ import annotations

import numpy as np


def dot(a: np.ndarray, b: np.ndarray) -> float:
    """The sum of `a * b` over two 1-D arrays of the same length, as a float.

    Not np.dot: numpy hands a long float vector to OpenBLAS, which splits it over its worker
    threads, and those spin for a while after every call. Once per 2 M-row chunk (the chunk
    size then), that spin cost `capplan profile` about a fifth of its CPU time on a busy 2-core
    machine (30 M rows: 4.34 s vs 5.44 s of CPU, OPENBLAS_NUM_THREADS=1 vs unset;
    bench/profile_speed.py). numpy's own einsum loop is as fast on one thread and sums in the
    same order on every machine.
    """
    return float(np.einsum("i,i->", a, b))
