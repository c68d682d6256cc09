"""Request specs drawn from a Profile: joint lengths, shared system prompts, multi-turn sessions.

The load test asks for request number i and gets a `RequestSpec`: how many input and output
tokens, and the chat messages whose text reads as exactly that many tokens under the
approximate tokenizer (`profiles.tokenize.keyed_text`), so the emulator and the profiler
count what was sampled.

Two layers keep the stream seeded and cheap to share between load-generator processes:
- `WorkloadStream` walks the request numbers in order and decides only *shapes* (lengths,
  which shared prefix, which session and turn) from one seeded generator, read a block of
  uniforms at a time (a scalar numpy draw takes the generator's lock, pure Python once gevent
  has patched threading: bench/loadgen_parts.py): a few microseconds a request. Every process
  that walks the same stream with the same seed sees the same shapes, so distributed workers
  can each take every N-th request without talking to each other.
- `render_messages` turns a shape into text. Each message's text is keyed by (seed, kind, id)
  (`profiles.tokenize.keyed_text`: a slice of a precomputed word pool, a few microseconds),
  so a shared system prompt is byte-identical in every request that uses it (prefix caches
  can hit), an earlier turn's text is reproduced exactly when a later turn of the session
  repeats it as context, and messages with different keys share no prompt block.

Prompt text is built on the fly for sending and never stored.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np

from profiles.model import Profile
from profiles.tokenize import keyed_text

Role = Literal["system", "user", "assistant"]

# Message text seeds: (seed, kind, id) keeps every message's text independent and stable.
_KIND_SYSTEM = 1
_KIND_USER = 2
_KIND_ASSISTANT = 3

_MAX_OPEN_SESSIONS = 256
_UNIFORM_BLOCK = 4096  # uniforms drawn at once from the stream's generator


@dataclass(frozen=True, slots=True)
class MessageShape:
    """One message of a request, by length: its text is rendered from `text_key` on demand."""

    role: Role
    tokens: int
    text_key: tuple[int, int]  # (kind, id)


@dataclass(frozen=True, slots=True)
class RequestShape:
    """Lengths-only description of request number `index` (no text)."""

    index: int
    input_tokens: int
    output_tokens: int
    messages: tuple[MessageShape, ...]
    prefix_index: int | None = None  # which shared system prompt, if any
    session_id: int | None = None
    turn: int = 0


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """A request ready to send: lengths plus rendered (role, text) messages."""

    index: int
    input_tokens: int
    output_tokens: int
    messages: tuple[tuple[Role, str], ...]
    session_id: int | None = None
    turn: int = 0

    def prompt(self) -> str:
        """The messages joined into one completions prompt (same token count)."""
        return " ".join(text for _, text in self.messages if text)


@dataclass(frozen=True)
class _Session:
    session_id: int
    turn: int
    messages: tuple[MessageShape, ...]
    last_output_tokens: int
    last_index: int


class WorkloadStream:
    """Seeded stream of request shapes drawn from a profile (see the module docstring).

    `pairs` are the profile sampler's (input, output) pairs; shared prefixes come from
    `profile.prefix.top_prefixes` with their request shares; when the profile has sessions,
    a share `1 - sessions / rows` of requests continues an open session: its prompt repeats
    the session so far (system prompt, earlier turns and answers) and adds a new user message.
    """

    def __init__(self, profile: Profile, seed: int) -> None:
        pairs = np.asarray(profile.lengths.sampler.pairs, dtype=np.int64).reshape(-1, 2)
        if len(pairs) == 0:
            pairs = np.array(
                [
                    [
                        max(1, round(profile.lengths.input.p50)),
                        max(1, round(profile.lengths.output.p50)),
                    ]
                ]
            )
        self._pairs = np.maximum(pairs, 1)
        self._pair_list = [(int(i), int(o)) for i, o in self._pairs.tolist()]
        self._seed = int(seed)
        self._uniform = _Uniforms(np.random.default_rng([self._seed, 0x5EED]))
        prefixes = profile.prefix.top_prefixes if profile.prefix.available else []
        self._prefix_tokens = [int(p.prefix_tokens) for p in prefixes]
        shares = np.array([max(0.0, p.request_share) for p in prefixes], dtype=float)
        total = float(shares.sum())
        if total > 1.0:
            shares = shares / total
        # Cumulative shares; a draw above the last one means "no shared prefix".
        self._prefix_cum: list[float] = np.cumsum(shares).tolist()
        self._follow_share = _follow_up_share(profile)
        turns = profile.sessions.turns
        self._max_turns = int(turns.max) if turns is not None else 1
        growth = profile.sessions.context_growth_tokens
        self._growth_mean = float(growth.mean) if growth is not None and growth.mean > 0 else None
        self._max_input = max(int(profile.lengths.input.max), int(self._pairs[:, 0].max()))
        self._open: list[_Session] = []
        self._next_index = 0
        self._next_session = 0

    @property
    def seed(self) -> int:
        return self._seed

    def __iter__(self) -> Iterator[RequestShape]:
        return self

    def __next__(self) -> RequestShape:
        index = self._next_index
        self._next_index += 1
        u = self._uniform
        in_tokens, out_tokens = self._pair_list[u.below(len(self._pair_list))]
        follow = self._follow_share > 0 and self._open and u.next() < self._follow_share
        if follow:
            shape = self._continue_session(index, in_tokens, out_tokens)
            if shape is not None:
                return shape
        return self._new_request(index, in_tokens, out_tokens)

    def _new_request(self, index: int, in_tokens: int, out_tokens: int) -> RequestShape:
        prefix_index: int | None = None
        messages: list[MessageShape] = []
        if self._prefix_cum:
            pos = bisect.bisect_right(self._prefix_cum, self._uniform.next())
            # The prefix must leave at least one token of user text.
            if pos < len(self._prefix_cum) and self._prefix_tokens[pos] < in_tokens:
                prefix_index = pos
                n_prefix = self._prefix_tokens[pos]
                messages.append(MessageShape("system", n_prefix, (_KIND_SYSTEM, pos)))
        used = sum(m.tokens for m in messages)
        messages.append(MessageShape("user", in_tokens - used, (_KIND_USER, index)))
        session_id: int | None = None
        if self._follow_share > 0:
            session_id = self._next_session
            self._next_session += 1
            self._open.append(_Session(session_id, 0, tuple(messages), out_tokens, index))
            if len(self._open) > _MAX_OPEN_SESSIONS:
                self._open.pop(0)
        return RequestShape(
            index, in_tokens, out_tokens, tuple(messages), prefix_index, session_id, 0
        )

    def _continue_session(self, index: int, in_tokens: int, out_tokens: int) -> RequestShape | None:
        pos = self._uniform.below(len(self._open))
        session = self._open[pos]
        growth = (
            max(1, int(self._uniform.exponential(self._growth_mean)))
            if self._growth_mean is not None
            else in_tokens
        )
        answer = MessageShape(
            "assistant", session.last_output_tokens, (_KIND_ASSISTANT, session.last_index)
        )
        messages = (*session.messages, answer, MessageShape("user", growth, (_KIND_USER, index)))
        total = sum(m.tokens for m in messages)
        self._open.pop(pos)
        if total > self._max_input:
            return None  # the session outgrew the profile's longest prompt: it ends here
        turn = session.turn + 1
        if turn + 1 < self._max_turns:
            self._open.append(_Session(session.session_id, turn, messages, out_tokens, index))
        prefix_index = messages[0].text_key[1] if messages[0].role == "system" else None
        return RequestShape(
            index, total, out_tokens, messages, prefix_index, session.session_id, turn
        )


class _Uniforms:
    """Uniform draws in [0, 1) from `rng`, a block at a time, and the draws built on them."""

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng
        self._block: list[float] = []
        self._pos = 0

    def next(self) -> float:
        if self._pos == len(self._block):
            self._block = self._rng.random(_UNIFORM_BLOCK).tolist()
            self._pos = 0
        self._pos += 1
        return self._block[self._pos - 1]

    def below(self, n: int) -> int:
        """An integer in [0, n), each equally likely (n far below 2**53)."""
        return min(int(self.next() * n), n - 1)

    def exponential(self, mean: float) -> float:
        return -mean * math.log1p(-self.next())


def _follow_up_share(profile: Profile) -> float:
    """Share of requests that are a later turn of a session (rows minus sessions, over rows)."""
    sessions = profile.sessions
    rows = profile.source.rows
    if not sessions.available or sessions.count <= 0 or rows <= 0:
        return 0.0
    return max(0.0, min(0.95, 1.0 - sessions.count / rows))


def render_messages(shape: RequestShape, seed: int) -> RequestSpec:
    """Build the text of every message of `shape`; the same (shape, seed) gives the same text,
    and each message reads as exactly its token count under `ApproxTokenizer`."""
    rendered = tuple((m.role, keyed_text(m.tokens, (seed, *m.text_key))) for m in shape.messages)
    return RequestSpec(
        shape.index, shape.input_tokens, shape.output_tokens, rendered, shape.session_id, shape.turn
    )


def replay_shape(index: int, input_tokens: int, output_tokens: int) -> RequestShape:
    """A shape with a log's own lengths (trace replay): one user message."""
    n_in = max(1, int(input_tokens))
    return RequestShape(
        index, n_in, max(1, int(output_tokens)), (MessageShape("user", n_in, (_KIND_USER, index)),)
    )
