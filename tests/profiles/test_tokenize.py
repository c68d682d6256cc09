"""Approximate tokenizer, synthetic text and chained block hashes."""

from __future__ import annotations

import random
import re
import zlib

import numpy as np

from profiles.tokenize import ApproxTokenizer, chained_block_hashes, keyed_text, synthetic_text


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


def _reference_ids(text: str) -> list[int]:
    """The encoder's definition: a CRC-32 of every four characters of each word or
    punctuation piece."""
    pieces = re.findall(r"\w+|[^\w\s]", text)
    return [zlib.crc32(p[i : i + 4].encode("utf-8")) for p in pieces for i in range(0, len(p), 4)]


def test_encode_gives_the_definitions_ids_on_any_text() -> None:
    """The encoder and the count split on whitespace, the encoder remembers ids (the emulator
    encodes every prompt on its event loop): the ids must stay those of the definition, which
    prefix hashes in profiles and the emulator's cache share. Unicode letters, digits and
    spaces, underscores, punctuation inside words, words longer than four characters."""
    tok = ApproxTokenizer()
    rng = random.Random(0)
    alphabet = "aZ9 _-:,.!?\t\n" + "éß中語" + "\u00a0\u2003\x1c\u3000" + "١٢"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(2000)]
    texts += [
        f"user: {synthetic_text(300, np.random.default_rng(2))}\n",
        keyed_text(200, (1, 2)),
        "internationalization, don't -- re_use 12345678!",
    ]
    for text in texts:
        assert tok.encode(text) == _reference_ids(text), repr(text)
        assert tok.count(text) == len(_reference_ids(text)), repr(text)
