"""Keyed prompt text (the load generator's): exact token counts, stable keys, block sharing."""

from __future__ import annotations

import os
import subprocess
import sys
from itertools import islice

from planner.fleet.traffic import shape_block_hashes
from profiles.model import SharedPrefix
from profiles.tokenize import ApproxTokenizer, chained_block_hashes, keyed_text
from profiles.workload import WorkloadStream, render_messages
from testkit.profiles import make_profile

TOK = ApproxTokenizer()
BLOCK = 16


def test_exact_token_count_at_every_length_and_pool_boundary() -> None:
    pool = 1 << 16  # keyed_text's pool size: runs of it and past it wrap around
    for n in (0, 1, 2, 3, 4, 5, 17, 513, pool - 1, pool + 4, pool + 5, 2 * pool + 9):
        text = keyed_text(n, (7, 2, n))
        assert TOK.count(text) == n
        assert text == text.strip() and "  " not in text


def test_same_key_same_text_in_another_process() -> None:
    keys = [(0, 1, 3), (5, 2, 123456), (2**40, 3, 7)]
    here = [keyed_text(300, k) for k in keys]
    code = (
        "from profiles.tokenize import keyed_text;"
        f"print('\\n'.join(keyed_text(300, k) for k in {keys!r}))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.splitlines() == here


def test_different_keys_differ_in_their_first_block() -> None:
    openings = {keyed_text(BLOCK, (0, 2, i)) for i in range(20_000)}
    openings |= {keyed_text(BLOCK, (1, 2, i)) for i in range(20_000)}
    assert len(openings) == 40_000
    # A longer text starts with the shorter one of the same key (the pool is read in order).
    assert keyed_text(400, (3, 1, 9)).startswith(keyed_text(100, (3, 1, 9)))


def _common_prefix(a: tuple[int, ...] | list[int], b: tuple[int, ...] | list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def test_prompts_share_blocks_exactly_where_their_shapes_share_messages() -> None:
    # Truth: planner.fleet.traffic.shape_block_hashes hashes message keys and token offsets, no
    # text.
    prefixes = [
        SharedPrefix(prefix_tokens=64, request_share=0.4, token_share=0.1),
        SharedPrefix(prefix_tokens=40, request_share=0.3, token_share=0.05),
    ]
    profile = make_profile([(100, 20), (700, 20)], prefixes=prefixes, sessions=60, rows=300)
    shapes = list(islice(WorkloadStream(profile, 11), 250))
    text_hashes = []
    for shape in shapes:
        spec = render_messages(shape, 11)
        assert TOK.count(spec.prompt()) == shape.input_tokens
        text_hashes.append(chained_block_hashes(TOK.encode(spec.prompt()), BLOCK))
    key_hashes = [shape_block_hashes(s.messages, BLOCK, s.input_tokens) for s in shapes]
    shared = 0
    for i in range(len(shapes)):
        for j in range(i + 1, len(shapes)):
            common = _common_prefix(key_hashes[i], key_hashes[j])
            assert _common_prefix(text_hashes[i], text_hashes[j]) == common
            shared += common > 0
    assert shared > 1000  # system prompts and sessions: many pairs share blocks
