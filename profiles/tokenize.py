"""Token counting and chained prompt-block hashes, shared by the profiler, emulator and load test.

Two tokenizers behind one protocol:
- `ApproxTokenizer` (default): splits text into word and punctuation pieces and counts each
  piece as ceil(len / 4) tokens, close to BPE tokenizers on English text (about 4 characters
  a token). It is deterministic, needs no file, and `synthetic_text(n)` builds text that it
  reads as exactly n tokens, so a prompt the load test builds for n tokens reads as n in the
  emulator and in the profiler. `keyed_text(n, key)` builds such text for a key of integers
  by slicing a precomputed word pool (a few microseconds, where a numpy generator seeded per
  message took 30-80: bench/loadgen_parts.py): what the load generator sends.
- `HFTokenizer`: a Hugging Face `tokenizer.json` through the `tokenizers` package.

Block hashes follow vLLM's prefix caching: a prompt's full blocks of `block_tokens` tokens
are hashed in a chain, each block's hash covering its parent's hash and its own token ids,
so equal hash prefixes mean an equal prompt prefix.
"""

from __future__ import annotations

import functools
import hashlib
import re
import zlib
from pathlib import Path
from typing import Protocol

import numpy as np

from contracts.errors import InputError

_PIECE = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_CHARS_PER_TOKEN = 4


class Tokenizer(Protocol):
    """What capplan needs of a tokenizer."""

    name: str
    approximate: bool

    def count(self, text: str) -> int:
        """Number of tokens in `text`."""
        ...

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` (stable across processes)."""
        ...


class ApproxTokenizer:
    """Fast approximate tokenizer: ceil(len/4) tokens per word or punctuation piece."""

    name = "approx-4chars"
    approximate = True

    def count(self, text: str) -> int:
        return sum(-(-len(piece) // _CHARS_PER_TOKEN) for piece in _pieces(text))

    def encode(self, text: str) -> list[int]:
        # An id is the CRC-32 of its piece's UTF-8 (at most four characters), remembered: the
        # emulator encodes every prompt on its event loop, where 1,000 tokens once took 1.5 ms
        # and delayed every other stream's tokens (now about 0.3 ms).
        pieces = _pieces(text)
        if len(_IDS) > _IDS_MAX:
            _IDS.clear()
        if pieces and max(map(len, pieces)) <= _CHARS_PER_TOKEN:
            return list(map(_IDS.__getitem__, pieces))
        return [
            _IDS[piece[start : start + _CHARS_PER_TOKEN]]
            for piece in pieces
            for start in range(0, len(piece), _CHARS_PER_TOKEN)
        ]


def _pieces(text: str) -> list[str]:
    """`_PIECE`'s words and punctuation marks of `text`, found cheaply: whitespace ends a
    word, so a word of letters and digits alone (`isalnum`: `\\w` but the underscore) is one
    piece, and only the others go through the regex."""
    pieces: list[str] = []
    for word in text.split():
        if word.isalnum():
            pieces.append(word)
        else:
            pieces.extend(_PIECE.findall(word))
    return pieces


class _CrcIds(dict[str, int]):
    """Token ids by piece, computed on first use."""

    def __missing__(self, piece: str) -> int:
        value = self[piece] = zlib.crc32(piece.encode("utf-8"))
        return value


_IDS = _CrcIds()
_IDS_MAX = 1 << 20  # pieces remembered before the memo starts over (real text has many)


class HFTokenizer:
    """A Hugging Face `tokenizer.json` loaded with the `tokenizers` package."""

    approximate = False

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer as _HF

        try:
            self._tok = _HF.from_file(str(path))
        except Exception as err:  # the tokenizers package raises plain Exception subclasses
            raise InputError(f"{path}: not a Hugging Face tokenizer.json ({err})") from err
        self.name = f"hf:{Path(path).name}"

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)


def load_tokenizer(path: str | Path | None) -> Tokenizer:
    """The tokenizer at `path` (a tokenizer.json), or the approximate one when `path` is None.

    Raises InputError when the file is missing or not a tokenizer.
    """
    if path is None:
        return ApproxTokenizer()
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: tokenizer file not found (expected a Hugging Face tokenizer.json)")
    return HFTokenizer(p)


def chained_block_hashes(token_ids: list[int] | np.ndarray, block_tokens: int) -> list[int]:
    """Chained 64-bit hashes of the full blocks of `token_ids` (a partial last block is skipped)."""
    ids = np.asarray(token_ids, dtype=np.uint32)
    n_blocks = len(ids) // block_tokens
    raw = ids[: n_blocks * block_tokens].tobytes()  # slicing bytes is cheaper than arrays
    size = 4 * block_tokens
    hashes: list[int] = []
    parent = b"\x00" * 8
    for b in range(n_blocks):
        h = hashlib.blake2b(parent, digest_size=8)
        h.update(raw[b * size : (b + 1) * size])
        parent = h.digest()
        hashes.append(int.from_bytes(parent, "little"))
    return hashes


_SYLLABLES = ("ka", "lo", "mi", "ne", "su", "ta", "ro", "vi", "de", "po", "za", "fu", "ge", "hi")


def _vocabulary() -> list[str]:
    # 2-syllable words of 4 characters: each one reads as exactly one approximate token.
    return [a + b for a in _SYLLABLES for b in _SYLLABLES]


_VOCAB = _vocabulary()


def synthetic_text(n_tokens: int, rng: np.random.Generator) -> str:
    """Text that `ApproxTokenizer` counts as exactly `n_tokens` tokens (words drawn from `rng`)."""
    if n_tokens <= 0:
        return ""
    idx = rng.integers(0, len(_VOCAB), size=n_tokens)
    return " ".join([_VOCAB[i] for i in idx.tolist()])  # tolist: numpy ints index slowly


# keyed_text's pool: _POOL_WORDS random vocabulary words, each followed by one space, stored
# twice in a row so that any run of up to _POOL_WORDS words from any start is one slice.
_POOL_WORDS = 1 << 16
_WORD_CHARS = 5  # four letters and a space
_TAG_WORDS = 4  # words chosen by the key's hash: 196**4 ~ 1.5e9 distinct openings
_POOL_SEED = 0x9E3779B9


@functools.cache
def _pool() -> str:
    idx = np.random.default_rng(_POOL_SEED).integers(0, len(_VOCAB), size=_POOL_WORDS)
    once = "".join([_VOCAB[i] + " " for i in idx.tolist()])
    return once + once


def _pool_run(start: int, n_words: int) -> str:
    """`n_words` words of the circular pool from word `start`, single-spaced."""
    pool = _pool()
    if n_words <= _POOL_WORDS:
        return pool[start * _WORD_CHARS : (start + n_words) * _WORD_CHARS - 1]
    whole, rest = divmod(n_words, _POOL_WORDS)
    runs = [_pool_run(start, _POOL_WORDS)] * whole
    if rest:
        runs.append(_pool_run(start, rest))
    return " ".join(runs)


def keyed_text(n_tokens: int, key: tuple[int, ...]) -> str:
    """Text that `ApproxTokenizer` counts as exactly `n_tokens` tokens, the same for the same
    `key` in every process; two keys' texts almost surely differ in their first four words.

    The first four words come from a 64-bit hash of `key` (1.5e9 openings), the rest is a run
    of a fixed random word pool from a hashed start. Two keys' texts share a first 16-token
    block only when both the opening and the start collide (about 1 in 1e14), so prompts built
    from keyed messages share prefix-cache blocks exactly where they share messages.
    """
    if n_tokens <= 0:
        return ""
    digest = hashlib.blake2b(",".join(map(str, key)).encode(), digest_size=8).digest()
    h = int.from_bytes(digest, "little")
    start = (h >> 32) % _POOL_WORDS
    tag = h & 0xFFFFFFFF
    words: list[str] = []
    for _ in range(min(n_tokens, _TAG_WORDS)):
        tag, i = divmod(tag, len(_VOCAB))
        words.append(_VOCAB[i])
    if n_tokens > _TAG_WORDS:
        words.append(_pool_run(start, n_tokens - _TAG_WORDS))
    return " ".join(words)
