"""Loose ends of a rendered capplan PDF that a careful reader trips over (issue 61): a page left
nearly empty or a heading left alone at a page's foot, a latency column without its unit, a
path broken inside a name, chart lines hidden under each other, "1 instances", an SLO given
only in its grammar, and a method section that describes another search than the one that
found the answer.

Read with PyMuPDF, as testkit.pdf_check reads a page; `loose_ends(pdf, ...)` returns one line
per problem; `python -m testkit.pdf_check report.pdf` prints them with the page check's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pymupdf

FOOTER_TOP_PT = 790.0  # A4 body ends 18 mm above the page's foot; below it is the footer
NEAR_EMPTY_SHARE = 0.25  # a page (not the last) whose text stops in its top quarter
COLUMN_REACH_PT = 200.0  # a column head's cells lie this far below it at most
HEADING_PT = 10.4  # headings are set at 10.5 pt and larger; body text at 8.8 pt and smaller
# A latency metric in the SLO's grammar as a column head: "ttft:p95", "e2e:p99".
_METRIC = re.compile(r"^(ttft|tpot|itl|e2e):p\d{2}$", re.IGNORECASE)
_BARE_NUMBER = re.compile(r"^[0-9][0-9,]*(\.[0-9]+)?$")
_TIME_UNIT = re.compile(r"^(ms|s|min|h|µs)\b")
# "1 instances": one of a countable noun the report uses, written as a plural.
_PLURAL_AFTER_ONE = re.compile(
    r"(?<![\d.,])\b1 (instances|GPUs|requests|users|levels|stages|services|workers|spares)\b"
)
_SLO_GRAMMAR = re.compile(r"\b(ttft|tpot|itl|e2e):p\d{2}\s*<=\s*[0-9.]+\s*m?s\b", re.IGNORECASE)
# How each language says "95 % of requests see ..." (reports.i18n: slo_words).
SLO_WORDS = {"en": re.compile(r"%\s+of\s+requests"), "zh": re.compile(r"%\s*的请求")}
# How each language names the search that produced the answer (reports.i18n: method_limit_*).
# Only the method section (from its heading on) is read: other pages name the fast search too.
METHOD_WORDS = {
    "en": {"heading": "Assumptions and method", "fast": "fast search", "measured": "bracketed"},
    "zh": {"heading": "假设与方法", "fast": "快速搜索", "measured": "按指数扩大负载"},
}


@dataclass(frozen=True)
class Line:
    """One line of text on a page: its words, top, bottom, the largest font size and the
    leftmost x of each word."""

    words: tuple[str, ...]
    xs: tuple[float, ...]
    top: float
    bottom: float
    size: float


def _lines(page: pymupdf.Page) -> list[Line]:
    sizes: dict[tuple[int, int], float] = {}
    for b, block in enumerate(page.get_text("dict")["blocks"]):
        for k, line in enumerate(block.get("lines", [])):
            if line["dir"] == (1.0, 0.0):  # rotated axis titles are not lines
                sizes[(b, k)] = max((s["size"] for s in line["spans"]), default=0.0)
    grouped: dict[tuple[int, int], list[tuple[float, float, float, str]]] = {}
    for x0, top, _x1, bottom, word, b, k, _w in page.get_text("words"):
        if (b, k) in sizes:
            grouped.setdefault((b, k), []).append((x0, top, bottom, word))
    return [
        Line(
            words=tuple(w[3] for w in ws),
            xs=tuple(w[0] for w in ws),
            top=min(w[1] for w in ws),
            bottom=max(w[2] for w in ws),
            size=sizes[key],
        )
        for key, ws in grouped.items()
    ]


def _body(lines: Sequence[Line]) -> list[Line]:
    return [ln for ln in lines if ln.bottom <= FOOTER_TOP_PT]


def empty_page(lines: Sequence[Line], n: int, last: bool, height: float) -> list[str]:
    """A page other than the last whose text stops in its top quarter, and a heading that is
    the last line of a page (its section starts on the next one)."""
    body = _body(lines)
    if not body:
        return [] if last else [f"page {n}: no text above the footer"]
    problems = []
    bottom = max(ln.bottom for ln in body)
    if not last and bottom < NEAR_EMPTY_SHARE * height:
        problems.append(f"page {n}: nearly empty, its text stops {bottom:.0f} pt from the top")
    lowest = max(body, key=lambda ln: ln.bottom)
    # a heading starts at the text's left margin: a large bold word ending a table cell
    # (the risk table's "Growth beyond the / plan") is not one
    margin = min(ln.xs[0] for ln in body)
    if lowest.size >= HEADING_PT and lowest.xs[0] <= margin + 2.0 and not last:
        problems.append(f"page {n}: heading {' '.join(lowest.words)!r} alone at the page's foot")
    return problems


def unitless_latency(lines: Sequence[Line], n: int) -> list[str]:
    """Numbers in a table column headed by a latency metric (ttft:p95) that carry no time
    unit, in the column's head or beside the number. A head is a cell of its own: the metric
    alone on its line, or followed by its unit ("ttft:p95 (s)"); its column runs down to the
    first line in another type size."""
    problems = []
    ordered = sorted(lines, key=lambda ln: ln.top)
    for i, head in enumerate(ordered):
        if len(head.words) > 2 or not _METRIC.match(head.words[0]):
            continue
        if len(head.words) == 2 and _TIME_UNIT.match(head.words[1].strip("()")):
            continue  # the head carries the unit
        below = [ln for ln in ordered[i + 1 :] if ln.top - head.bottom < COLUMN_REACH_PT]
        # the column ends at the first line set in another size than its head (a heading, a
        # chart's title or ticks): a chart's axis ticks are bare numbers, and one may stand
        # under the head (the demo's Chinese page 4 put the recovery chart's "450" s there)
        end = next(
            (k for k, ln in enumerate(below) if abs(ln.size - head.size) > 0.5), len(below)
        )
        problems += _bare_below(below[:end], head.xs[0], head.words[0], n)
    return problems


def _bare_below(rows: Sequence[Line], x: float, head: str, n: int) -> list[str]:
    found = []
    for row in rows:
        for k, (word, wx) in enumerate(zip(row.words, row.xs, strict=True)):
            if abs(wx - x) > 3 or not _BARE_NUMBER.match(word):
                continue
            after = row.words[k + 1] if k + 1 < len(row.words) else ""
            if not _TIME_UNIT.match(after):
                found.append(f"page {n}: {word!r} under {head!r} has no unit")
    return found


def hidden_series(page: pymupdf.Page, n: int) -> list[str]:
    """Two chart lines in different colours through the same points: the one drawn first is
    hidden under the other (and so is its legend entry's meaning)."""
    seen: dict[tuple[tuple[float, float], ...], tuple[float, ...]] = {}
    problems = []
    for d in page.get_drawings():
        items = d["items"]
        if d["type"] != "s" or len(items) < 2 or any(i[0] != "l" for i in items):
            continue
        points = tuple((round(i[1].x), round(i[1].y)) for i in items) + (
            (round(items[-1][2].x), round(items[-1][2].y)),
        )
        color = tuple(d.get("color") or ())
        if points in seen and seen[points] != color:
            problems.append(f"page {n}: two chart lines drawn over each other at {points[0]}")
        seen.setdefault(points, color)
    return problems


def broken_names(text: str, n: int, paths: Iterable[str]) -> list[str]:
    """A path or file name from `paths` broken across lines inside a name (records.parqu/et),
    not at a separator."""
    problems = []
    for path in paths:
        pattern = "\n?".join(re.escape(c) for c in path)
        for match in re.finditer(pattern, text):
            piece = match.group(0)
            for at in [m.start() for m in re.finditer("\n", piece)]:
                if piece[at - 1] not in "/\\-_" and piece[at + 1] not in "/\\":
                    left, right = piece[:at].rsplit("/", 1)[-1], piece[at + 1 :].split("/")[0]
                    problems.append(f"page {n}: path broken inside a name: {left!r} / {right!r}")
    return problems


def plurals(text: str, n: int) -> list[str]:
    """ "1 instances" and its kind."""
    return [f"page {n}: {m.group(0)!r}" for m in _PLURAL_AFTER_ONE.finditer(text)]


def slo_words(text: str, lang: str) -> list[str]:
    """The first page gives its SLO in grammar (ttft:p95<=2s) only, not in words."""
    if _SLO_GRAMMAR.search(text) and not SLO_WORDS[lang].search(text):
        return ["page 1: the SLO is given only as ttft:p95<=2s, not in words"]
    return []


def method_words(text: str, lang: str, method: str) -> list[str]:
    """The method section names another search than `method` (limit.json's), or none."""
    words = METHOD_WORDS[lang]
    start = text.rfind(words["heading"])
    if start < 0:
        return [f"method: no section headed {words['heading']!r}"]
    text = text[start:]
    other = "measured" if method == "fast" else "fast"
    problems = []
    if words[other] in text:
        problems.append(f"method: describes the {other} search ({words[other]!r}), not {method}")
    if words[method] not in text:
        problems.append(f"method: does not name the {method} search ({words[method]!r})")
    return problems


def loose_ends(
    pdf: Path,
    *,
    lang: str = "en",
    method: str | None = None,
    paths: Iterable[str] = (),
) -> list[str]:
    """Every loose end of `pdf`, one line each. `method` (limit.json's "fast" or "measured")
    checks the method section; `paths` are the input paths the appendix prints."""
    paths = list(paths)
    problems: list[str] = []
    with pymupdf.open(pdf) as doc:
        texts = []
        for n, page in enumerate(doc, start=1):
            lines = _lines(page)
            text = page.get_text("text")
            texts.append(text)
            problems += empty_page(lines, n, n == doc.page_count, page.rect.height)
            problems += unitless_latency(lines, n)
            problems += hidden_series(page, n)
            problems += broken_names(text, n, paths)
            if lang == "en":
                problems += plurals(text, n)
    if texts:
        problems += slo_words(texts[0], lang)
    if method is not None:
        problems += method_words("\n".join(texts), lang, method)
    return problems
