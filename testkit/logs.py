"""Small request logs built in code for the profiler tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from profiles.tokenize import synthetic_text


def write_jsonl(path: Path, objs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return path


def build_openai_log(
    folder: Path, n: int = 300, seed: int = 1, usage: bool = True
) -> tuple[Path, float, dict]:
    """An OpenAI JSONL log whose prefix hit ratio is known by construction.

    Three system prompts of 255, 511 and 1023 approximate tokens: with the one role-marker
    token in front, each fills exactly 16, 32 or 64 blocks of 16 tokens. Every user message
    is fresh random text. So a request hits exactly its system prompt's blocks when an
    earlier request used the same system prompt, and nothing else. Returns the path, the
    expected ideal hit ratio and facts about the log.
    """
    rng = np.random.default_rng(seed)
    system_tokens = [255, 511, 1023]
    systems = [synthetic_text(k, rng) for k in system_tokens]
    objs = []
    seen: set[int] = set()
    hit = total = 0
    for i in range(n):
        which = int(rng.choice(3, p=[0.5, 0.3, 0.2]))
        user_tokens = int(rng.integers(20, 400))
        prompt_tokens = 1 + system_tokens[which] + 1 + user_tokens
        total += prompt_tokens
        if which in seen:
            hit += 1 + system_tokens[which]
        seen.add(which)
        out_tokens = int(rng.integers(1, 300))
        obj: dict = {
            "timestamp": 1_700_000_000 + i * 0.5,
            "request": {
                "model": "m1" if i % 2 else "m2",
                "messages": [
                    {"role": "system", "content": systems[which]},
                    {"role": "user", "content": synthetic_text(user_tokens, rng)},
                ],
                "max_tokens": 512,
                "user": f"u{i % 7}",
            },
            "response": {"choices": [{"message": {"content": synthetic_text(out_tokens, rng)}}]},
        }
        if usage:
            obj["response"]["usage"] = {
                "prompt_tokens": prompt_tokens + 5,
                "completion_tokens": out_tokens,
                "prompt_tokens_details": {"cached_tokens": 0},
            }
        objs.append(obj)
    path = write_jsonl(folder / f"openai_{seed}.jsonl", objs)
    return path, hit / total, {"n": n, "largest_system": 1024}


def build_mooncake_log(path: Path, n: int, seed: int = 0) -> int:
    """A Mooncake-style trace (ms timestamps, 512-token blocks by `hash_ids`) of `n` requests
    at 50 a second: 60 % behind one of 200 system prompts of 2 to 16 blocks (Zipf-popular)
    with a tail of their own, 25 % follow-up turns that extend one of up to 5000 live
    conversations by 1 to 6 blocks, 15 % fresh prompts of 1 to 30 blocks. Returns the
    number of blocks."""
    rng = np.random.default_rng(seed)
    t_ms = np.cumsum(rng.exponential(20.0, n)).astype(np.int64)
    next_id = 0
    systems = []
    for size in rng.integers(2, 17, size=200):
        systems.append(list(range(next_id, next_id + int(size))))
        next_id += int(size)
    live: list[list[int]] = []
    kind = rng.random(n)
    blocks = 0
    with path.open("w") as out:
        for i in range(n):
            turn = kind[i] < 0.25 and bool(live)
            if turn:
                k = int(rng.integers(len(live)))
                base = live[k]
            elif kind[i] < 0.85:
                base = systems[(int(rng.zipf(1.3)) - 1) % len(systems)]
            else:
                base = []
            tail = int(rng.integers(1, 7 if turn else 31))
            ids = base + list(range(next_id, next_id + tail))
            next_id += tail
            if turn and len(ids) > 64:  # a long conversation ends
                live[k] = live[-1]
                live.pop()
            elif turn:
                live[k] = ids
            elif len(live) < 5000:
                live.append(ids)
            blocks += len(ids)
            out.write(
                f'{{"timestamp": {t_ms[i]}, "input_length": {512 * len(ids) - 100}, '
                f'"output_length": {int(rng.integers(1, 500))}, "hash_ids": {ids}}}\n'
            )
    return blocks


def chained_workload(
    seed: int, n_req: int, block_tokens: int = 16
) -> tuple[list[list[int]], np.ndarray, np.ndarray, np.ndarray]:
    """Requests as chains of block ids: 60 % behind one of 5 system prompts of 3 to 40
    blocks (Zipf-popular), 30 % follow-up turns extending one of up to 100 live
    conversations, 10 % fresh prompts; each with a tail of new blocks. Returns the chains,
    and as profiles.prefix takes them: every block back to back, blocks per request and the
    prompt tokens each covers (the last block partial)."""
    rng = np.random.default_rng(seed)
    next_id = 1
    systems = []
    for _ in range(5):
        n = int(rng.integers(3, 40))
        systems.append(list(range(next_id, next_id + n)))
        next_id += n
    live: list[list[int]] = []
    reqs: list[list[int]] = []
    for _ in range(n_req):
        u = rng.random()
        if live and u < 0.3:
            base = live[int(rng.integers(len(live)))]
        elif u < 0.9:
            base = systems[(int(rng.zipf(1.5)) - 1) % len(systems)]
        else:
            base = []
        tail = int(rng.integers(0 if base else 1, 25))
        req = base + list(range(next_id, next_id + tail))
        next_id += tail
        reqs.append(req)
        live.append(req)
        if len(live) > 100:
            live.pop(int(rng.integers(len(live))))
    flat = np.array([h for r in reqs for h in r], dtype=np.uint64)
    lengths = np.array([len(r) for r in reqs], dtype=np.int64)
    hash_tokens = lengths * block_tokens - rng.integers(0, block_tokens, size=lengths.size)
    return reqs, flat, lengths, hash_tokens
