"""Chinese paragraphs keep their Latin words whole: reportlab's CJK wrap broke a review's
service name across lines ("code-completio" / "n-east") wherever the name began before the
middle of a line. Laid out at many widths, every Latin word of the text sits whole on one
line (unless it is wider than a line), and the lines hold the text, in order."""

from __future__ import annotations

import re

import pytest
from reportlab.pdfbase.pdfmetrics import stringWidth

from reports import words_for
from reports.i18n import LATIN_FONT
from reports.layout import Layout
from reports.paragraphs import cjk_lines

TEXTS = [
    "服务 chat-assistant-production 需要 3 个实例，每月成本 $4,365，服务 code-completion-east "
    "需要两个实例",
    "在 H100-80GB tp1 上，trtllm 排名第一，比下一个引擎高出 10% 以上（6.74–22.8 req/s）。",
    "每实例上限 14.6 req/s 来自引擎模型；按公开服务结果，GPU 上的实测上限应在 4.93 req/s 至 "
    "16.7 req/s 之间（p10-p90 of all 24 published rows）。",
]
WORD = re.compile(r"[\x21-\x7e×·–²%]+")


def _lines(text: str, width: float) -> list[str]:
    layout = Layout(words_for("zh"))
    para = layout.para(text)
    para.wrap(width, 10_000)
    return ["".join(getattr(frag, "text", "") for frag in line.words) for line in para.blPara.lines]


@pytest.mark.parametrize("text", TEXTS)
def test_latin_words_are_never_broken_inside(text: str) -> None:
    size = Layout(words_for("zh")).styles.body.fontSize
    for width in range(70, 400, 9):
        lines = _lines(text, float(width))
        assert "".join(lines).replace(" ", "") == text.replace(" ", ""), (width, lines)
        for word in WORD.findall(text):
            if stringWidth(word, LATIN_FONT, size) < width - 1:
                assert any(word in line for line in lines), (width, word, lines)


def test_a_word_wider_than_a_line_is_cut_where_it_must_be() -> None:
    font = Layout(words_for("zh")).styles.body.fontName
    lines = cjk_lines("名称 " + "x" * 80 + " 结束", font, 9.0, 100.0)
    assert all(stringWidth(line, LATIN_FONT, 9.0) <= 100.0 for line in lines[1:-1])
    assert "".join(lines).replace(" ", "") == "名称" + "x" * 80 + "结束"


def test_a_name_wider_than_its_column_breaks_after_a_hyphen() -> None:
    """A review's table cell: "batch-summaries" in a column narrower than it read "batch-summ" /
    "aries"; it breaks after its hyphen."""
    font = Layout(words_for("zh")).styles.body.fontName
    width = stringWidth("summaries", LATIN_FONT, 9.0) + 2
    assert cjk_lines("batch-summaries", font, 9.0, width) == ["batch-", "summaries"]
