"""Regenerate reports/fontdata/wqy-microhei-gb2312.ttf, the CJK font shipped inside the wheel.

It is a subset of WenQuanYi Micro Hei (Apache-2.0; reports/fontdata/LICENSE-wqy-microhei.txt)
holding printable ASCII, every character GB2312 encodes (its 6763 hanzi, punctuation, full-width
forms, kana, Greek, Cyrillic, box drawing) and every non-ASCII character written in reports/
(the Chinese words of every page), with TrueType outlines so reportlab can embed it. Hinting
and OpenType layout tables are dropped: reportlab uses neither.

Run it after adding Chinese words that GB2312 lacks (a test fails until then):
`.venv/bin/pip install fonttools && .venv/bin/python scripts/build_cjk_font.py [--source PATH]`.
fontTools is needed only here, not at run time.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fontTools import subset
from fontTools.ttLib import TTCollection, TTFont

ROOT = Path(__file__).resolve().parents[1]
SOURCE = Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc")  # Debian: fonts-wqy-microhei
TARGET = ROOT / "reports" / "fontdata" / "wqy-microhei-gb2312.ttf"


def gb2312_chars() -> set[str]:
    """Every character GB2312 encodes: rows 0xA1..0xF7, cells 0xA1..0xFE of EUC-CN."""
    chars: set[str] = set()
    for row in range(0xA1, 0xF8):
        for cell in range(0xA1, 0xFF):
            try:
                chars.add(bytes([row, cell]).decode("gb2312"))
            except UnicodeDecodeError:
                continue  # an unassigned code point
    return chars


def report_chars() -> set[str]:
    """Every non-ASCII character of the report's source (its Chinese words live there)."""
    return {c for f in (ROOT / "reports").rglob("*.py") for c in f.read_text() if ord(c) > 0x7E}


def wanted_chars() -> set[str]:
    return {chr(c) for c in range(0x20, 0x7F)} | gb2312_chars() | report_chars()


def build(source: Path, target: Path) -> int:
    """Write the subset of face 0 of `source` to `target`; returns its size in bytes."""
    font = TTCollection(str(source)).fonts[0] if source.suffix == ".ttc" else TTFont(str(source))
    options = subset.Options()
    # reportlab neither shapes text nor sets it vertically: no layout or vertical metrics
    options.layout_features = []
    options.drop_tables += ["GSUB", "GPOS", "GDEF", "vhea", "vmtx", "FFTM"]
    options.hinting = False
    options.name_IDs = [0, 1, 2, 3, 4, 5, 6, 13, 14]  # names, copyright, licence text and URL
    options.notdef_outline = True
    options.glyph_names = False
    subsetter = subset.Subsetter(options)
    font.recalcTimestamp = False  # the same source gives the same bytes
    subsetter.populate(unicodes=[ord(c) for c in wanted_chars()])
    subsetter.subset(font)
    target.parent.mkdir(parents=True, exist_ok=True)
    font.save(str(target))
    return target.stat().st_size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", type=Path, default=SOURCE, help="wqy-microhei.ttc or .ttf")
    args = ap.parse_args()
    size = build(args.source, TARGET)
    print(f"{TARGET.relative_to(ROOT)}: {size} bytes")


if __name__ == "__main__":
    main()
