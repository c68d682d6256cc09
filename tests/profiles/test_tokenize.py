"""Approximate tokenizer, synthetic text and chained block hashes."""

from __future__ import annotations

import numpy as np

from profiles.tokenize import ApproxTokenizer, chained_block_hashes, synthetic_text


def test_synthetic_text_has_exact_token_count() -> None:
    tok = ApproxTokenizer()
    rng = np.random.default_rng(1)
    for n in (0, 1, 17, 513, 4000):
        assert tok.count(synthetic_text(n, rng)) == n


def test_approx_counts_long_words_as_several_tokens() -> None:
    tok = ApproxTokenizer()
    assert tok.count("internationalization") == 5  # 20 chars / 4
    assert tok.count("Hi, you!") == 4  # Hi , you !
    assert len(tok.encode("internationalization")) == 5


def test_chained_hashes_share_prefix_and_diverge_after() -> None:
    a = list(range(64))
    b = list(range(32)) + [999] * 32
    ha, hb = chained_block_hashes(a, 16), chained_block_hashes(b, 16)
    assert len(ha) == 4
    assert ha[:2] == hb[:2]
    assert ha[2] != hb[2] and ha[3] != hb[3]
    # a block's hash covers its parent: same tokens after a different prefix hash differently
    c = [999] * 16 + list(range(16, 32))
    assert chained_block_hashes(c, 16)[1] != ha[1]


def test_partial_block_is_not_hashed() -> None:
    assert chained_block_hashes(list(range(31)), 16) == chained_block_hashes(list(range(16)), 16)
