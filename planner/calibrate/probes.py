"""The calibration's HTTP side: timed streamed requests to a live server and what it reports.

Requests go to `/v1/completions` with the prompt as token ids (exact prompt lengths, no
tokeniser in the way) and are parsed by the load generator's own SSE reader
(`locustfiles.openai_stream.read_stream`), so TTFT means here what it means in a load test.
Concurrent streams run on threads, each with its own connection; their chunk times give
the decode step time in the window where all of them were decoding.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from contracts.calibration import KvCapacity
from contracts.errors import TargetError
from locustfiles.openai_stream import StreamResult, read_stream

TIMEOUT_S = 120.0


@dataclass(frozen=True, kw_only=True)
class Target:
    """A live OpenAI-compatible server: base URL, served model name, optional bearer token."""

    host: str
    model: str
    api_key: str | None = None

    def headers(self) -> dict[str, str]:
        head = {"Content-Type": "application/json"}
        if self.api_key:
            head["Authorization"] = f"Bearer {self.api_key}"
        return head


@dataclass(frozen=True, kw_only=True)
class Stream:
    """One streamed answer: when it was sent (perf_counter), TTFT and the times of its
    content chunks (seconds from the send)."""

    sent_s: float
    ttft_s: float
    chunk_times_s: tuple[float, ...]
    completion_tokens: int


# vLLM's prefix-cache hit counters (tokens), newest name first, as profiles.prometheus reads
# them; SGLang and llama.cpp expose no counter (SGLang a hit-rate gauge only).
PREFIX_HITS = ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")


def random_prompt(rng: np.random.Generator, n: int, vocab: int) -> list[int]:
    """n random token ids, clear of the lowest ids (where tokenisers keep special tokens)."""
    return [int(x) for x in rng.integers(min(100, vocab // 4), vocab, n)]


def stream(target: Target, prompt: Sequence[int], max_tokens: int) -> Stream:
    """Send one streamed completion (ignore_eos) and time it; TargetError when it fails."""
    body = {
        "model": target.model,
        "prompt": list(prompt),
        "max_tokens": max_tokens,
        "min_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.0,
    }
    req = urllib.request.Request(
        target.host.rstrip("/") + "/v1/completions",
        json.dumps(body).encode(),
        target.headers(),
    )
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
            res = read_stream(resp.readline, time.perf_counter, "completions")
    except urllib.error.HTTPError as err:
        raise TargetError(f"{target.host}: HTTP {err.code} on /v1/completions") from err
    except OSError as err:
        raise TargetError(f"{target.host}: request failed ({err})") from err
    return _timed(res, t0, target)


def _timed(res: StreamResult, t0: float, target: Target) -> Stream:
    if res.error_class == "empty" and res.completion_tokens and res.end_t is not None:
        # A token that is part of a UTF-8 character comes back as no text (the server holds
        # the bytes back): its time is the stream's end, where usage says it was generated.
        res.first_token_t = res.last_token_t = res.end_t
        res.error_class = None
    if res.error_class is not None or res.first_token_t is None:
        raise TargetError(f"{target.host}: {res.error_class or 'no token'} {res.error_message}")
    first = res.first_token_t - t0
    times = [first, *(first + g for g in np.cumsum(res.gaps_s))]
    tokens = res.completion_tokens or res.content_chunks
    return Stream(
        sent_s=t0,
        ttft_s=first,
        chunk_times_s=tuple(float(t) for t in times),
        completion_tokens=tokens,
    )


def concurrent(target: Target, prompts: Sequence[Sequence[int]], max_tokens: int) -> list[Stream]:
    """One stream per prompt, all sent at once on their own threads; TargetError if any fails."""
    out: list[Stream | BaseException | None] = [None] * len(prompts)

    def run(i: int) -> None:
        try:
            out[i] = stream(target, prompts[i], max_tokens)
        except BaseException as err:  # re-raised below on the caller's thread
            out[i] = err

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT_S + 5)
    for item in out:
        if isinstance(item, BaseException):
            raise item
        if item is None:
            raise TargetError(f"{target.host}: a stream did not finish in {TIMEOUT_S:.0f} s")
    return [s for s in out if isinstance(s, Stream)]


def common_step_s(streams: Sequence[Stream]) -> float:
    """Seconds per decode step while every stream was decoding.

    Within the window from the last
    first token to the first last token, each stream's chunk gaps are its step times; the
    median over streams of (window chunk span / window gaps) is returned. Falls back to each
    stream's own mean gap when the window holds fewer than three chunks of a stream.
    """
    lo = max(s.sent_s + s.chunk_times_s[0] for s in streams)
    hi = min(s.sent_s + s.chunk_times_s[-1] for s in streams)
    per_stream = []
    for s in streams:
        inside = [s.sent_s + t for t in s.chunk_times_s if lo <= s.sent_s + t <= hi]
        if len(inside) >= 3:
            per_stream.append((inside[-1] - inside[0]) / (len(inside) - 1))
        elif len(s.chunk_times_s) >= 2:
            times = s.chunk_times_s
            per_stream.append((times[-1] - times[0]) / (len(times) - 1))
    if not per_stream:
        raise TargetError("decode probe: no stream produced two tokens")
    return float(np.median(per_stream))


def _get(target: Target, path: str) -> str | None:
    req = urllib.request.Request(target.host.rstrip("/") + path, headers=target.headers())
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return str(resp.read().decode("utf-8", "replace"))
    except (OSError, ValueError):
        return None  # an endpoint the server does not expose: the caller tries the next


_VLLM_CACHE = re.compile(r"^vllm:cache_config_info\{([^}]*)\}", re.MULTILINE)


def server_kv(target: Target) -> KvCapacity:
    """The server's KV capacity: llama.cpp's `/props` (n_ctx, total_slots) or vLLM's
    `/metrics` (cache_config_info: num_gpu_blocks x block_size); unknown otherwise."""
    props = _get(target, "/props")
    if props:
        try:
            data = json.loads(props)
            n_ctx = int(data["default_generation_settings"]["n_ctx"])
            slots = int(data.get("total_slots") or 1)
            return KvCapacity(
                tokens=n_ctx * slots, slots=slots, source="/props: n_ctx x total_slots"
            )
        except (ValueError, KeyError, TypeError):
            pass
    metrics = _get(target, "/metrics")
    found = _VLLM_CACHE.search(metrics or "")
    if found:
        labels = dict(re.findall(r'(\w+)="([^"]*)"', found.group(1)))
        try:
            tokens = int(labels["num_gpu_blocks"]) * int(labels["block_size"])
            return KvCapacity(tokens=tokens, source="/metrics: vllm:cache_config_info")
        except (KeyError, ValueError):
            pass
    return KvCapacity(source="not exposed (/props, /metrics)")


@dataclass(frozen=True, kw_only=True)
class CacheHits:
    """A prefix-cache hit counter's reading: its name and its value (tokens)."""

    metric: str
    tokens: float


def prefix_cache_hits(target: Target) -> CacheHits | None:
    """The server's prefix-cache hit counter now (summed over its series); None where
    /metrics is missing, unreadable or has no such counter."""
    text = _get(target, "/metrics")
    if not text:
        return None
    try:
        samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
    except ValueError:
        return None
    for name in PREFIX_HITS:
        values = [s.value for s in samples if s.name == name]
        if values:
            return CacheHits(metric=name, tokens=float(sum(values)))
    return None
