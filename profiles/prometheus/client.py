"""Reading a Prometheus server over its HTTP API: metric names, and range queries in chunks.

`PromClient` sends GET requests (stdlib urllib) with a bearer token or basic auth taken from
environment variables (the secret is read at the edge and never stored or printed). A range
query is cut into chunks of at most MAX_POINTS steps (Prometheus refuses more than 11,000
points per series), so a quarter at 15 s is read a chunk at a time. Every failure (unreachable,
HTTP error, a query Prometheus refuses) is one InputError naming the server and the reason.
"""

from __future__ import annotations

import base64
import json
import math
import os
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from contracts.errors import InputError

MAX_POINTS = 10_000
PREFETCH = 2  # range chunks asked for ahead of the one being read
TIMEOUT_S = 120.0
NO_INSTANCE = "(no instance label)"

Labels = tuple[tuple[str, str], ...]  # a series' labels, sorted


def instance_of(labels: Labels) -> str:
    return dict(labels).get("instance", NO_INSTANCE)


@dataclass(frozen=True, kw_only=True)
class Grid:
    """Evaluation times start_s + k * step_s for k = 0 .. points - 1 (epoch seconds)."""

    start_s: float
    step_s: float
    points: int
    chunk_points: int = MAX_POINTS

    def chunks(self) -> Iterator[tuple[int, int]]:
        """(first, stop) index ranges of at most `chunk_points` points."""
        for first in range(0, self.points, self.chunk_points):
            yield first, min(first + self.chunk_points, self.points)


def auth_header(token_env: str | None, basic_auth_env: str | None) -> str | None:
    """The Authorization header's value from the named environment variables (never logged)."""
    if token_env and basic_auth_env:
        raise InputError("give --token-env or --basic-auth-env, not both")
    for name in (token_env, basic_auth_env):
        if name and not os.environ.get(name):
            raise InputError(f"environment variable {name} is not set (or empty)")
    if token_env:
        return "Bearer " + os.environ[token_env]
    if basic_auth_env:
        pair = os.environ[basic_auth_env]
        if ":" not in pair:
            raise InputError(f"{basic_auth_env} must hold USER:PASSWORD")
        return "Basic " + base64.b64encode(pair.encode()).decode()
    return None


class PromClient:
    """GETs against one Prometheus server's /api/v1."""

    def __init__(self, url: str, authorization: str | None = None) -> None:
        parsed = urllib.parse.urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise InputError(f"prometheus:{url}: expected prometheus:http://HOST:PORT")
        self.url = url.rstrip("/")
        self._auth = authorization
        self.queries = 0
        self._count_lock = threading.Lock()  # chunks are fetched from a thread pool

    def _get(self, path: str, params: list[tuple[str, str]]) -> object:
        query = urllib.parse.urlencode(params)
        req = urllib.request.Request(f"{self.url}/api/v1/{path}?{query}")
        if self._auth:
            req.add_header("Authorization", self._auth)
        with self._count_lock:
            self.queries += 1
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
                body = json.load(resp)
        except urllib.error.HTTPError as err:
            raise InputError(f"Prometheus at {self.url} refused {path}: {_reason(err)}") from err
        except (urllib.error.URLError, OSError) as err:
            why = getattr(err, "reason", err)
            raise InputError(f"cannot reach Prometheus at {self.url} ({why})") from err
        except ValueError as err:
            raise InputError(f"{self.url} did not answer with Prometheus JSON ({err})") from err
        if not isinstance(body, dict) or body.get("status") != "success":
            why = body.get("error") if isinstance(body, dict) else body
            raise InputError(f"Prometheus at {self.url} refused {path}: {why}")
        return body.get("data")

    def metric_names(self, match: str, start_s: float, end_s: float) -> set[str]:
        """Names of the metrics with series matching `match` between start and end."""
        data = self._get(
            "label/__name__/values",
            [("match[]", match), ("start", _ts(start_s)), ("end", _ts(end_s))],
        )
        return set(data) if isinstance(data, list) else set()

    def instant(self, query: str, at_s: float) -> dict[Labels, float]:
        """Each series' value at one time (an instant query)."""
        data = self._get("query", [("query", query), ("time", _ts(at_s))])
        if not isinstance(data, dict) or data.get("resultType") != "vector":
            raise InputError("Prometheus answered an instant query without a vector")
        return {
            tuple(sorted(s.get("metric", {}).items())): float(s["value"][1])
            for s in data.get("result", [])
        }

    def range_chunks(
        self, query: str, grid: Grid
    ) -> Iterator[tuple[int, dict[Labels, np.ndarray]]]:
        """Per chunk: its first index, and each series' values on the chunk's points (NaN where
        the series has no value), keyed by its sorted labels.

        Up to PREFETCH chunks are asked for ahead of the one handed out, so Prometheus computes
        the next answers while this process parses the last (the waits release the GIL); the
        answers are parsed to arrays as they arrive, so memory holds PREFETCH chunks at most."""

        def fetch(bounds: tuple[int, int]) -> tuple[int, dict[Labels, np.ndarray]]:
            first, stop = bounds
            start = grid.start_s + first * grid.step_s
            end = grid.start_s + (stop - 1) * grid.step_s
            data = self._get(
                "query_range",
                [("query", query), ("start", _ts(start)), ("end", _ts(end)),
                 ("step", f"{grid.step_s:g}")],
            )  # fmt: skip
            return first, _matrix(data, start, grid.step_s, stop - first)

        chunks = list(grid.chunks())
        if len(chunks) == 1:
            yield fetch(chunks[0])
            return
        with ThreadPoolExecutor(max_workers=PREFETCH) as pool:
            pending: deque[Future[tuple[int, dict[Labels, np.ndarray]]]] = deque()
            for bounds in chunks:
                pending.append(pool.submit(fetch, bounds))
                if len(pending) > PREFETCH:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()


def _matrix(data: object, start_s: float, step_s: float, points: int) -> dict[Labels, np.ndarray]:
    out: dict[Labels, np.ndarray] = {}
    if not isinstance(data, dict) or data.get("resultType") != "matrix":
        raise InputError("Prometheus answered a range query without a matrix")
    for s in data.get("result", []):
        vals = np.full(points, np.nan)
        pairs = s.get("values", [])
        if pairs:
            # numpy converts the value strings in C; a series with a value at every point (the
            # usual case) needs no timestamps parsed beyond its first and last.
            v = np.array([p[1] for p in pairs], dtype=np.float64)
            first = round((float(pairs[0][0]) - start_s) / step_s)
            last = round((float(pairs[-1][0]) - start_s) / step_s)
            if len(pairs) == points and first == 0 and last == points - 1:
                vals = v
            else:
                t = np.fromiter((float(p[0]) for p in pairs), np.float64, len(pairs))
                idx = np.rint((t - start_s) / step_s).astype(np.int64)
                ok = (idx >= 0) & (idx < points)
                vals[idx[ok]] = v[ok]
        out[tuple(sorted(s.get("metric", {}).items()))] = vals
    return out


def _ts(epoch_s: float) -> str:
    return f"{epoch_s:.3f}" if not math.isclose(epoch_s, round(epoch_s)) else str(int(epoch_s))


def _reason(err: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(err.read().decode("utf-8", errors="replace"))
        return f"HTTP {err.code}: {body.get('error', body)}"
    except (ValueError, AttributeError):
        return f"HTTP {err.code} {err.reason}"
