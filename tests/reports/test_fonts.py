"""The Chinese report's font: an embedded CJK subset that poppler renders, the lookup order, the
font shipped inside the package on a machine without a CJK font, and the STSong-Light fallback
with its warning when even that one is missing.

"A machine without a CJK font" is real here, not mocked: FONTCONFIG_FILE points fontconfig
(for capplan's lookup and for poppler's rendering alike) at a folder holding only reportlab's
Latin font Vera, so `fc-match :lang=zh-cn` answers with a font that has no Chinese glyphs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
import reportlab
from PIL import Image
from reportlab.pdfbase.ttfonts import TTFontFile
from typer.testing import CliRunner

from capplan.cli import app
from contracts.errors import InputError
from reports import fonts, render_report
from reports.fonts import BUILTIN_CJK_FONT, ENV_VAR, SHIPPED_CJK_FONT, choose_cjk_font
from reports.i18n import STRINGS, Words
from reports.layout import Styles
from testkit.report_inputs import FixturePaths, write_fixture

VERA = Path(reportlab.__file__).parent / "fonts" / "Vera.ttf"  # Latin only: no U+4E2D
TITLE_CJK = STRINGS["zh"]["doc_title"].split("{")[0].rstrip(":")  # 容量基线
DPI = 144


def _tool(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} (poppler-utils) is needed; scripts/test.sh installs it"
    return path


def _pdffonts(pdf: Path) -> list[list[str]]:
    out = subprocess.run([_tool("pdffonts"), str(pdf)], capture_output=True, text=True, check=True)
    return [line.split() for line in out.stdout.splitlines()[2:]]


def _title_cells(pdf: Path, env: dict[str, str] | None = None) -> list[np.ndarray]:
    """Page 1 rendered by poppler: one grey-level bitmap per Chinese character of the title."""
    bbox = subprocess.run(
        [_tool("pdftotext"), "-f", "1", "-l", "1", "-bbox", str(pdf), "-"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    found = re.search(
        r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="[\d.]+" yMax="([\d.]+)">' + TITLE_CJK, bbox
    )
    assert found, f"the title {TITLE_CJK!r} is not in page 1's text"
    x0, y0, y1 = (float(v) for v in found.groups())
    prefix = pdf.with_name(pdf.stem + "-p1")
    subprocess.run(
        [_tool("pdftoppm"), "-r", str(DPI), "-f", "1", "-l", "1", "-gray", str(pdf), str(prefix)],
        check=True,
        env=env,
    )
    with Image.open(next(pdf.parent.glob(prefix.name + "*.pgm"))) as image:
        page = np.asarray(image, dtype=np.int16)
    em_px = Styles(Words("zh")).title.fontSize * DPI / 72  # a CJK glyph is one em wide
    px = DPI / 72
    top, bottom = round(y0 * px), round(y1 * px)
    return [
        page[top:bottom, round(x0 * px + i * em_px) : round(x0 * px + (i + 1) * em_px)]
        for i in range(len(TITLE_CJK))
    ]


def _title_is_visible(cells: list[np.ndarray]) -> bool:
    """Every character has ink and no two look alike: blanks and 'missing glyph' boxes fail."""
    inked = [cell < 128 for cell in cells]
    if not all(ink.mean() > 0.03 for ink in inked):
        return False
    return all((a != b).mean() > 0.05 for i, a in enumerate(inked) for b in inked[i + 1 :])


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory: pytest.TempPathFactory) -> FixturePaths:
    return write_fixture(tmp_path_factory.mktemp("fonts"))


@pytest.fixture
def no_cjk_fontconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Environment of a machine whose only font is Vera (fontconfig config in tmp_path)."""
    fonts = tmp_path / "fonts"
    fonts.mkdir()
    shutil.copy(VERA, fonts)
    conf = tmp_path / "fonts.conf"
    conf.write_text(
        '<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "fonts.dtd"><fontconfig>'
        f"<dir>{fonts}</dir><cachedir>{tmp_path / 'fc-cache'}</cachedir></fontconfig>"
    )
    monkeypatch.setenv("FONTCONFIG_FILE", str(conf))
    monkeypatch.delenv(ENV_VAR, raising=False)
    return dict(os.environ)


def _render_zh(paths: FixturePaths, out: Path, **kwargs: object) -> Path:
    return render_report(
        paths.profile,
        paths.run_dir,
        paths.plan,
        out,
        lang="zh",
        generated_at=datetime(2026, 11, 29, 12, 0, tzinfo=UTC),
        **kwargs,  # type: ignore[arg-type]
    )


def test_chinese_report_embeds_a_cjk_subset_that_renders(
    fixture_dir: FixturePaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    font = choose_cjk_font()
    assert font.embedded, font.warning
    warnings: list[str] = []
    pdf = _render_zh(fixture_dir, tmp_path / "zh.pdf", warn=warnings.append)
    assert warnings == []
    _assert_cjk_subset_embedded(pdf)
    assert _title_is_visible(_title_cells(pdf))


def _assert_cjk_subset_embedded(pdf: Path) -> list[list[str]]:
    """The PDF's embedded subsets (pdffonts rows); fails on STSong-Light or a whole font."""
    rows = _pdffonts(pdf)
    assert not [r for r in rows if r[0] == BUILTIN_CJK_FONT]
    embedded = [r for r in rows if re.fullmatch(r"[A-Z]{6}\+.+", r[0])]
    assert embedded, rows
    for row in embedded:  # name, type, encoding, emb, sub, uni, object id
        assert row[-5:-3] == ["yes", "yes"], row
    return embedded


def _report_cli(paths: FixturePaths, out: Path) -> str:
    """`capplan report --lang zh` on the fixture; returns its stderr."""
    inputs = ["--profile", str(paths.profile), "--run", str(paths.run_dir)]
    args = [*inputs, "--plan", str(paths.plan), "--lang", "zh", "-o", str(out)]
    result = CliRunner().invoke(app, ["report", *args])
    assert result.exit_code == 0, result.output
    return result.stderr


def test_without_a_system_cjk_font_the_report_embeds_the_shipped_one(
    fixture_dir: FixturePaths, tmp_path: Path, no_cjk_fontconfig: dict[str, str]
) -> None:
    out = tmp_path / "shipped.pdf"
    assert _report_cli(fixture_dir, out) == ""
    embedded = _assert_cjk_subset_embedded(out)
    assert any("WenQuanYi" in row[0] for row in embedded), embedded
    # poppler has no CJK font either here: the title's ink comes from the embedded subset
    assert _title_is_visible(_title_cells(out, env=no_cjk_fontconfig))


def test_the_shipped_font_holds_gb2312_and_every_character_of_the_reports_words() -> None:
    cmap = TTFontFile(str(SHIPPED_CJK_FONT)).charToGlyph
    sources = Path(fonts.__file__).parent.rglob("*.py")
    words = {c for f in sources for c in f.read_text(encoding="utf-8") if ord(c) > 0x7E}
    missing = sorted(c for c in words if ord(c) not in cmap)
    assert not missing, f"run scripts/build_cjk_font.py: the shipped font lacks {missing}"
    hanzi = [c for c in cmap if 0x4E00 <= c <= 0x9FFF]
    assert len(hanzi) >= 6763  # GB2312's hanzi, and the report's own
    assert all(c in cmap for c in range(0x20, 0x7F))
    assert SHIPPED_CJK_FONT.with_name("LICENSE-wqy-microhei.txt").is_file()


def test_without_any_cjk_font_the_report_warns_once_and_still_renders(
    fixture_dir: FixturePaths,
    tmp_path: Path,
    no_cjk_fontconfig: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fonts, "SHIPPED_CJK_FONT", tmp_path / "removed.ttf")
    out = tmp_path / "fallback.pdf"
    stderr = _report_cli(fixture_dir, out)
    assert stderr.count("warning:") == 1
    assert "STSong-Light" in stderr and "fonts-wqy-microhei" in stderr
    assert "--cjk-font" in stderr and "removed.ttf: no such font file" in stderr
    rows = _pdffonts(out)
    assert [r[-5:-3] for r in rows if r[0] == BUILTIN_CJK_FONT] == [["no", "no"]]
    # The render check of the test above fails on this PDF where poppler has no CJK font
    # either: the title comes out as blanks or identical boxes.
    assert not _title_is_visible(_title_cells(out, env=no_cjk_fontconfig))


def test_lookup_skips_a_latin_font_that_fontconfig_offers(
    no_cjk_fontconfig: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fc_match = shutil.which("fc-match")
    if fc_match is not None:  # the trap the lookup avoids: fontconfig answers with Vera
        answer = subprocess.run(
            [fc_match, ":lang=zh-cn", "file"], capture_output=True, text=True, check=True
        )
        assert "Vera.ttf" in answer.stdout
    font = choose_cjk_font()
    assert font.path == SHIPPED_CJK_FONT and font.warning is None
    monkeypatch.setattr(fonts, "SHIPPED_CJK_FONT", tmp_path / "removed.ttf")
    font = choose_cjk_font()
    assert font.name == BUILTIN_CJK_FONT and not font.embedded
    assert font.warning is not None and "removed.ttf: no such font file" in font.warning


def test_an_explicit_font_comes_first_and_must_hold_chinese(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"--cjk-font .*missing\.ttf: no such font file"):
        choose_cjk_font(tmp_path / "missing.ttf", environ={})
    with pytest.raises(InputError, match=r"Vera\.ttf: the font has no Chinese glyphs"):
        choose_cjk_font(VERA, environ={})
    not_a_font = tmp_path / "notes.ttf"
    not_a_font.write_text("not a font")
    with pytest.raises(InputError, match=f"{ENV_VAR}=.*notes.ttf: reportlab cannot read it"):
        choose_cjk_font(environ={ENV_VAR: str(not_a_font)})
    # the option wins over the environment variable
    with pytest.raises(InputError, match="--cjk-font"):
        choose_cjk_font(VERA, environ={ENV_VAR: str(not_a_font)})


def test_english_report_never_looks_for_a_cjk_font(
    fixture_dir: FixturePaths, tmp_path: Path
) -> None:
    pdf = render_report(
        fixture_dir.profile,
        fixture_dir.run_dir,
        fixture_dir.plan,
        tmp_path / "en.pdf",
        cjk_font=tmp_path / "missing.ttf",
    )
    names = {r[0] for r in _pdffonts(pdf)}
    assert names == {"Helvetica", "Helvetica-Bold", "Courier"}
