"""A small shortfall reads as one: the no-logs guide's plan printed "KV headroom -0%" for a
cache 0.4 % short (448,304 tokens against 449,968 needed), and the report's risk the same."""

from __future__ import annotations

from capplan.commands.plan import _headroom
from reports.i18n.words import Words


def test_a_small_negative_share_is_not_minus_zero() -> None:
    for lang in ("en", "zh"):
        words = Words(lang)
        assert words.pct(-0.0037, 0) == "-0.4 %"
        assert words.pct(-0.2, 0) == "-20 %" and words.pct(0.36, 0) == "36 %"
    assert _headroom(1 - 449_968 / 448_304) == "-0.4%"
    assert _headroom(0.36) == "36%" and _headroom(-0.2) == "-20%"
