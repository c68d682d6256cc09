"""Request specs from a profile: seeded, exact token counts, shared prefixes, sessions."""

from __future__ import annotations

from itertools import islice

import numpy as np

from profiles.model import SharedPrefix
from profiles.tokenize import ApproxTokenizer
from profiles.workload import WorkloadStream, render_messages
from testkit.profiles import make_profile

TOK = ApproxTokenizer()


def test_same_seed_same_requests_and_lengths_from_the_sampler() -> None:
    pairs = [(50, 5), (300, 40), (1200, 200)]
    profile = make_profile(pairs)
    a = [render_messages(s, 3) for s in islice(WorkloadStream(profile, 3), 50)]
    b = [render_messages(s, 3) for s in islice(WorkloadStream(profile, 3), 50)]
    c = [render_messages(s, 4) for s in islice(WorkloadStream(profile, 4), 50)]
    assert a == b and a != c
    assert {(r.input_tokens, r.output_tokens) for r in a} <= set(pairs)
    for r in a:
        assert TOK.count(r.prompt()) == r.input_tokens
        assert sum(TOK.count(t) for _, t in r.messages) == r.input_tokens


def test_shared_system_prompts_with_their_shares() -> None:
    prefixes = [
        SharedPrefix(prefix_tokens=64, request_share=0.5, token_share=0.1),
        SharedPrefix(prefix_tokens=32, request_share=0.2, token_share=0.05),
    ]
    profile = make_profile([(200, 10), (400, 10)], prefixes=prefixes)
    specs = [render_messages(s, 0) for s in islice(WorkloadStream(profile, 0), 2000)]
    systems = [r.messages[0][1] for r in specs if r.messages[0][0] == "system"]
    counts: dict[str, int] = {}
    for text in systems:
        counts[text] = counts.get(text, 0) + 1
    shares = sorted((n / len(specs) for n in counts.values()), reverse=True)
    assert len(shares) == 2
    assert abs(shares[0] - 0.5) < 0.04 and abs(shares[1] - 0.2) < 0.04
    assert all(TOK.count(r.prompt()) == r.input_tokens for r in specs)


def test_sessions_grow_their_context() -> None:
    profile = make_profile([(100, 20), (3000, 20)], sessions=250, rows=1000)
    shapes = list(islice(WorkloadStream(profile, 1), 400))
    follow = [s for s in shapes if s.turn > 0]
    assert 0.5 < len(follow) / len(shapes) < 0.9  # 1 - 250/1000 = 0.75 minus sessions cut short
    by_session: dict[int, list[int]] = {}
    for s in shapes:
        assert s.session_id is not None
        by_session.setdefault(s.session_id, []).append(s.input_tokens)
    grown = [v for v in by_session.values() if len(v) > 1]
    assert grown and all(np.all(np.diff(v) > 0) for v in grown)
    # A later turn repeats the earlier turn's text exactly (so prefix caches can hit).
    later = next(s for s in shapes if s.turn == 1)
    first = next(s for s in shapes if s.session_id == later.session_id and s.turn == 0)
    a, b = render_messages(first, 1), render_messages(later, 1)
    assert b.messages[: len(a.messages)] == a.messages
    assert TOK.count(b.prompt()) == b.input_tokens
