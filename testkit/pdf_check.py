"""Checks of a rendered PDF read as a reader sees it: English sentences left in a Chinese
report, text outside the page, text drawn over other text, fonts not embedded.

Word boxes and shaded boxes come from PyMuPDF (a test dependency), the fonts from poppler's
`pdffonts`. Used by the report tests (tests/reports/test_page_check.py,
tests/planner/review/test_review_cli.py) and usable on any PDF capplan writes:
`python -m testkit.pdf_check report.pdf` (with testkit.pdf_loose_ends's checks).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pymupdf

from testkit.pdf_loose_ends import loose_ends

# Latin words a Chinese report keeps: units, metric and product names, the CLI's own words.
ALLOWED_WORDS = frozenset(
    """req s ms h d min B GiB MiB GB token tokens UTC TTFT TPOT ITL E2E e2e SLO KV GPU GPUs CPU CV
    TP LRU M G c N n k x mfu mbu sqrt R DGX NVIDIA HGX Locust capplan vllm sglang llama usd USD
    HTTP p50 p90 p95 p99 ttft tpot rps users inf Erlang Allen Cunneen""".split()  # noqa: SIM905
)
# A token that is data, not a word: holds a digit, a path or key separator, an SLO operator.
_DATA = re.compile(r"[0-9/\\._:=<>@$%+#~]|^-|-$")
_WORD = re.compile(r"^[A-Za-z][A-Za-z'’-]*$")
# Chinese characters and full-width punctuation end a run of English words.
_SPLIT = re.compile(r"[\s\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]+")
_EDGE = "()[]{}\"'“”‘’,;:!?…·"


def english_runs(text: str, min_words: int = 3, data: Iterable[str] = ()) -> list[str]:
    """Runs of `min_words` or more English words in a row: the sentences left untranslated.

    Tokens are split at white space and at Chinese characters; a token that is a unit, a
    metric or product name (ALLOWED_WORDS) or data (numbers, paths, ids, SLO expressions)
    breaks a run. Strings in `data` (names and messages from the inputs) are not words.
    """
    for value in sorted(data, key=len, reverse=True):
        text = text.replace(value, " 0 ")
    runs: list[str] = []
    current: list[str] = []
    for raw in [*_SPLIT.split(text), ""]:
        token = raw.strip(_EDGE)
        english = (
            bool(token)
            and _WORD.match(token) is not None
            and not _DATA.search(token)
            and token not in ALLOWED_WORDS
        )
        if english:
            current.append(token)
            continue
        if len(current) >= min_words:
            runs.append(" ".join(current))
        current = []
    return runs


@dataclass(frozen=True)
class Box:
    """A word on a page, in points from the page's top left."""

    text: str
    x0: float
    top: float
    x1: float
    bottom: float

    def overlap(self, other: Box) -> float:
        """Area both boxes cover, over the smaller one's area (0..1)."""
        w = min(self.x1, other.x1) - max(self.x0, other.x0)
        h = min(self.bottom, other.bottom) - max(self.top, other.top)
        if w <= 0 or h <= 0:
            return 0.0
        smaller = min(
            (self.x1 - self.x0) * (self.bottom - self.top),
            (other.x1 - other.x0) * (other.bottom - other.top),
        )
        return w * h / smaller if smaller > 0 else 0.0


OVERLAP = 0.25  # words sharing a quarter of the smaller one's box are drawn over each other
MARGIN_PT = 0.5  # rounding of glyph boxes at the page's edge
STRADDLE = 0.15  # a word with 15-85 % of its box inside a shaded box is cut by its edge


def _words(page: pymupdf.Page) -> list[Box]:
    # unclipped: a word past the page's edge is what the check looks for
    words = page.get_text("words", clip=pymupdf.INFINITE_RECT())
    return [Box(w[4], w[0], w[1], w[2], w[3]) for w in words]


def outside(words: Sequence[Box], width: float, height: float) -> list[Box]:
    """Words whose box reaches past the page's edge."""
    return [
        w
        for w in words
        if w.x0 < -MARGIN_PT
        or w.top < -MARGIN_PT
        or w.x1 > width + MARGIN_PT
        or w.bottom > height + MARGIN_PT
    ]


def overlapping(words: Sequence[Box]) -> list[tuple[Box, Box]]:
    """Pairs of words drawn over each other (a sweep down the page by top edge)."""
    ordered = sorted(words, key=lambda w: w.top)
    pairs = []
    for i, a in enumerate(ordered):
        for b in ordered[i + 1 :]:
            if b.top >= a.bottom:
                break
            if a.overlap(b) > OVERLAP:
                pairs.append((a, b))
    return pairs


def straddling(words: Sequence[Box], boxes: Sequence[Box]) -> list[tuple[Box, Box]]:
    """Words cut by the edge of a shaded box: partly inside it, partly out."""
    pairs = []
    for w in words:
        for box in boxes:
            inside = w.overlap(box) if _area(w) <= _area(box) else 0.0
            if STRADDLE < inside < 1 - STRADDLE:
                pairs.append((w, box))
    return pairs


def _area(b: Box) -> float:
    return (b.x1 - b.x0) * (b.bottom - b.top)


def _shaded(page: pymupdf.Page) -> list[Box]:
    """Filled rectangles larger than a glyph and not white (table rows, answer boxes, bars)."""
    out = []
    for d in page.get_drawings():
        fill, rect = d.get("fill"), d["rect"]
        if fill is None or min(fill) > 0.99 or rect.width <= 12 or rect.height <= 6:
            continue
        out.append(Box("", rect.x0, rect.y0, rect.x1, rect.y1))
    return out


# The PDF standard's 14 fonts: every viewer must have them, so a PDF need not carry them.
STANDARD_FONTS = re.compile(r"^(Helvetica|Courier|Times|Symbol|ZapfDingbats)(-[A-Za-z]+)?$")


def unembedded_fonts(pdf: Path) -> list[str]:
    """Fonts the PDF uses but does not carry (pdffonts' emb column 'no'), other than the
    standard 14 (a Chinese font left out shows as empty boxes where none is installed)."""
    tool = shutil.which("pdffonts")
    if tool is None:
        raise RuntimeError("pdffonts (poppler-utils) is needed to check the fonts")
    out = subprocess.run([tool, str(pdf)], capture_output=True, text=True, check=True).stdout
    missing = []
    for line in out.splitlines()[2:]:
        cols = line.split()
        # name type [encoding...] emb sub uni object ID: emb is the 5th field from the end
        if len(cols) >= 6 and cols[-5] == "no" and not STANDARD_FONTS.match(cols[0]):
            missing.append(cols[0])
    return missing


def page_problems(pdf: Path, english: bool = False, data: Iterable[str] = ()) -> list[str]:
    """Every problem of every page, one line each: text outside the page, text over text,
    text cut by a shaded box's edge, fonts not embedded and (with `english`, for a Chinese
    report) English sentences other than the inputs' own `data`."""
    data = list(data)
    problems = [f"font not embedded: {name}" for name in unembedded_fonts(pdf)]
    with pymupdf.open(pdf) as doc:
        for n, page in enumerate(doc, start=1):
            words = _words(page)
            problems += [
                f"page {n}: {w.text!r} outside the page at ({w.x0:.0f}, {w.top:.0f})"
                for w in outside(words, page.rect.width, page.rect.height)
            ]
            problems += [
                f"page {n}: {a.text!r} overlaps {b.text!r} at ({a.x0:.0f}, {a.top:.0f})"
                for a, b in overlapping(words)
            ]
            problems += [
                f"page {n}: {w.text!r} is cut by the edge of a shaded box at "
                f"({box.x0:.0f}, {box.top:.0f})-({box.x1:.0f}, {box.bottom:.0f})"
                for w, box in straddling(words, _shaded(page))
            ]
            if english:
                text = page.get_text("text")
                problems += [f"page {n}: English: {run!r}" for run in english_runs(text, data=data)]
    return problems


def language(pdf: Path) -> str:
    """The language of `pdf`: zh when its first page holds Chinese characters, else en."""
    with pymupdf.open(pdf) as doc:
        text = doc[0].get_text("text") if doc.page_count else ""
    return "zh" if re.search(r"[\u4e00-\u9fff]", text) else "en"


def main(paths: Iterable[str]) -> int:
    """Print every problem of each PDF, checked in its own language (a Chinese one also for
    English sentences); 1 when any."""
    found = 0
    for path in paths:
        lang = language(Path(path))
        problems = page_problems(Path(path), english=lang == "zh")
        for line in problems + loose_ends(Path(path), lang=lang):
            print(f"{path}: {line}")
            found += 1
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
