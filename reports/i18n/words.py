"""One language's words, fonts and number formats (`Words`), and the Latin runs of CJK text.

Chinese text is set in the font `reports.fonts` chooses (an embedded CJK TrueType subset, or the
built-in STSong-Light); Latin runs inside it stay in Helvetica. Units (req/s, s, ms, GiB, $) and
metric names (TTFT, TPOT, p95, KV) stay as they are in both languages.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from contracts.errors import InputError
from reports.fonts import BUILTIN_CJK_FONT, builtin_cjk_font, is_cjk_font
from reports.i18n.strings import STRINGS

Lang = Literal["en", "zh"]
LANGS: tuple[Lang, ...] = ("en", "zh")

LATIN_FONT = "Helvetica"

# Runs of these characters are set in Helvetica inside Chinese text: STSong-Light's own Latin
# glyphs are full-width-ish and read poorly in numbers and metric names, and one Latin font
# keeps numbers alike whichever CJK font sets the rest.
_LATIN_RUN = re.compile(r"[\x20-\x7e×·–²%]+")


def split_runs(text: str) -> list[tuple[str, bool]]:
    """Split text into (run, is_latin) pieces, in order."""
    runs: list[tuple[str, bool]] = []
    pos = 0
    for m in _LATIN_RUN.finditer(text):
        if m.start() > pos:
            runs.append((text[pos : m.start()], False))
        runs.append((m.group(), True))
        pos = m.end()
    if pos < len(text):
        runs.append((text[pos:], False))
    return runs


# "1 instances" -> "1 instance": a count of one, written by a template made for many.
_ONE_PLURAL = re.compile(
    r"(?<![\d.,])\b1 (instance|GPU|request|user|level|stage|service|worker|spare|token)s\b"
)


def singular_of_one(text: str) -> str:
    """English text with a count of exactly one followed by its noun in the singular."""
    return _ONE_PLURAL.sub(r"1 \1", text)


def _not_finite(value: float | None) -> str:
    """How every number format shows None, NaN and infinities."""
    if value == math.inf:
        return "inf"  # a percentile reached by failed requests
    return "–"


@dataclass(frozen=True)
class Words:
    """The strings, fonts and number formats of one language.

    `cjk_font` is the registered name of the font for Chinese text (`reports.fonts`); it has
    no bold face, so Chinese headings are set in it too. Documents get theirs from
    `reports.words_for`, which finds the embedded font; `Words("zh")` alone means STSong-Light.
    """

    lang: Lang
    cjk_font: str = BUILTIN_CJK_FONT

    def __post_init__(self) -> None:
        if self.lang not in LANGS:
            raise InputError(f"unknown language {self.lang!r}; expected one of {', '.join(LANGS)}")
        if not is_cjk_font(self.cjk_font):
            raise InputError(f"{self.cjk_font!r} is not a font chosen by reports.fonts")
        if self.lang == "zh" and self.cjk_font == BUILTIN_CJK_FONT:
            builtin_cjk_font()

    @property
    def font(self) -> str:
        return self.cjk_font if self.lang == "zh" else "Helvetica"

    @property
    def bold(self) -> str:
        return self.cjk_font if self.lang == "zh" else "Helvetica-Bold"

    @property
    def mono(self) -> str:
        return "Courier"

    def t(self, key: str, **values: object) -> str:
        """The string for key in this language, with {placeholders} filled (English: a count
        of one with its noun in the singular)."""
        text = STRINGS[self.lang][key].format(**values)
        return singular_of_one(text) if self.lang == "en" else text

    def router(self, name: str) -> str:
        """A router in words: its string `routing_NAME` in this language, else its registry name
        with spaces (a router added in planner.fleet.routing alone still reads)."""
        key = f"routing_{name}"
        return self.t(key) if key in STRINGS[self.lang] else name.replace("_", " ")

    # number formats (same in both languages: units and digits are not translated)
    @staticmethod
    def num(value: float | None, digits: int = 3) -> str:
        if value is None or not math.isfinite(value):
            return _not_finite(value)
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}g}"

    def rate(self, value: float | None) -> str:
        """An arrival rate in req/s."""
        return "–" if value is None else f"{self.num(value)} req/s"

    def load(self, value: float | None, unit: str) -> str:
        """A load in the limit's unit: req/s, or a user count."""
        if value is None:
            return "–"
        if unit == "rps":
            return self.rate(value)
        if self.lang == "zh":
            return f"{self.num(value)} 个并发用户"
        return f"{self.num(value)} {'user' if value == 1 else 'users'}"

    @staticmethod
    def seconds(value: float | None) -> str:
        if value is None or not math.isfinite(value):
            return _not_finite(value)
        if abs(value) < 1.0:
            return f"{value * 1000:.0f} ms"
        return f"{value:.3g} s"

    @staticmethod
    def pct(value: float | None, digits: int = 1) -> str:
        if value is None or not math.isfinite(value):
            return _not_finite(value)
        # a small shortfall is not "-0 %": one digit more until it shows (at most two)
        while value < 0 and round(value * 100, digits) == 0 and digits < 2:
            digits += 1
        return f"{value * 100:.{digits}f} %"

    @staticmethod
    def usd(value: float | None) -> str:
        if value is None or not math.isfinite(value):
            return _not_finite(value)
        return f"${value:,.0f}" if abs(value) >= 100 or value == 0 else f"${value:,.2f}"

    @staticmethod
    def integer(value: float | None) -> str:
        return "–" if value is None else f"{value:,.0f}"

    @staticmethod
    def gib(value_bytes: float) -> str:
        return f"{value_bytes / 1024**3:.1f} GiB"

    def duration(self, value_s: float) -> str:
        if value_s >= 2 * 86400:
            return f"{value_s / 86400:.1f} d"
        if value_s >= 2 * 3600:
            return f"{value_s / 3600:.1f} h"
        if value_s >= 120:
            return f"{value_s / 60:.0f} min"
        return f"{value_s:.0f} s"
