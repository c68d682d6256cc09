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
