"""How long the emulator holds its event loop to read one chat request: the prompt's token ids
and block hashes (`planner.emulator.protocol.parse_request`), against the tokenizer it had
before 2026-12-02 (baseline, the same run).

The emulator parses each request on the loop that also delivers every stream's tokens, so
this time delays other requests' first tokens: at the demo's 4x, with 1,147-token prompts at
58 requests a wall second, the old 1.5 ms encoder put the emulator's first tokens 18-26 ms
(engine time) behind its engine model under load, and the fast search's delay check called
the model inadequate (docs/accuracy/limit.md).

    .venv/bin/python bench/emulator_parse.py [--tokens 1147] [--repeat 300]
"""

from __future__ import annotations

import argparse
import hashlib
import timeit
import zlib
from collections.abc import Callable
from types import SimpleNamespace

import numpy as np

from planner.emulator import protocol
from planner.emulator.protocol import parse_request
from profiles.tokenize import _PIECE, ApproxTokenizer, chained_block_hashes, synthetic_text


def baseline_ids(text: str) -> list[int]:
    """The encoder before: a CRC-32 per four-character chunk of every regex piece."""
    ids: list[int] = []
    for piece in _PIECE.findall(text):
        for start in range(0, len(piece), 4):
            ids.append(zlib.crc32(piece[start : start + 4].encode("utf-8")))
    return ids


def baseline_hashes(token_ids: list[int] | np.ndarray, block_tokens: int) -> list[int]:
    """The block hashes before: each block sliced from the array."""
    ids = np.asarray(token_ids, dtype=np.uint32)
    hashes: list[int] = []
    parent = b"\x00" * 8
    for b in range(len(ids) // block_tokens):
        h = hashlib.blake2b(parent, digest_size=8)
        h.update(ids[b * block_tokens : (b + 1) * block_tokens].tobytes())
        parent = h.digest()
        hashes.append(int.from_bytes(parent, "little"))
    return hashes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--tokens", type=int, default=1147, help="prompt tokens (the demo's mean)")
    ap.add_argument("--repeat", type=int, default=300)
    args = ap.parse_args()
    text = synthetic_text(args.tokens, np.random.default_rng(0))
    body = {"messages": [{"role": "user", "content": text}], "max_tokens": 260, "stream": True}
    chat = f"user: {text}\n"  # the emulator's chat template
    tokenizer = ApproxTokenizer()
    assert tokenizer.encode(chat) == baseline_ids(chat), "the encoder's ids changed"
    ids = baseline_ids(chat)
    assert chained_block_hashes(ids, 16) == baseline_hashes(ids, 16), "the hashes changed"

    def best_ms(f: Callable[[], object]) -> float:
        return min(timeit.repeat(f, number=args.repeat, repeat=5)) / args.repeat * 1000

    rows = [
        ("encode", best_ms(lambda: baseline_ids(chat)), best_ms(lambda: tokenizer.encode(chat))),
        (
            "block hashes",
            best_ms(lambda: baseline_hashes(ids, 16)),
            best_ms(lambda: chained_block_hashes(ids, 16)),
        ),  # fmt: skip
    ]
    now = best_ms(lambda: parse_request(body, "chat", 16))
    # the whole parse with the baseline's encoder and hashes swapped in
    saved = protocol._TOKENIZER, protocol.chained_block_hashes
    protocol._TOKENIZER = SimpleNamespace(encode=baseline_ids)  # type: ignore[assignment]
    protocol.chained_block_hashes = baseline_hashes
    try:
        before = best_ms(lambda: parse_request(body, "chat", 16))
    finally:
        protocol._TOKENIZER, protocol.chained_block_hashes = saved
    rows.append(("parse_request", before, now))
    print(f"a chat request of {args.tokens} prompt tokens, ms per request (best of 5):")
    for name, old, new in rows:
        print(f"  {name:14s} baseline {old:6.3f}  now {new:6.3f}  {old / new:4.1f}x faster")


if __name__ == "__main__":
    main()
