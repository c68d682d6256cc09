"""The font Chinese reports are set in: an embedded subset of a CJK TrueType font.

Lookup order: an explicit path (`--cjk-font`, else the CAPPLAN_CJK_FONT environment variable),
then the system's fonts in fontconfig's order of preference for Simplified Chinese
(`fc-match -s :lang=zh-cn`), then the font shipped inside the package (`SHIPPED_CJK_FONT`: a
subset of WenQuanYi Micro Hei, Apache-2.0, holding GB2312 and every character of the report's
Chinese words; `scripts/build_cjk_font.py` makes it), so a Chinese PDF renders wherever it is
opened, from any install. A system font comes first because it may cover the rare characters
of a service's own name that the shipped subset lacks. A candidate is kept only when reportlab
can read it (TrueType outlines; a face of a .ttc collection by its index; OpenType with CFF
outlines, such as Noto Sans CJK, is refused) and it really holds Chinese glyphs: U+4E2D must be
in its cmap, because fontconfig answers with a Latin font such as DejaVu Sans when no CJK font
is installed. reportlab embeds only the glyphs a document uses (a subset), so the PDF stays
small.

Only when the shipped font is missing too (a broken install) is reportlab's built-in CID font
STSong-Light used, with one warning: it is not embedded, and viewers without Adobe's Asian font
pack show its characters blank or as boxes. Latin runs inside Chinese text stay in Helvetica
either way (`reports.i18n.split_runs`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.cidfonts import UnicodeCIDFont
from reportlab.pdfbase.ttfonts import TTFError, TTFont

from contracts.errors import InputError

ENV_VAR = "CAPPLAN_CJK_FONT"
BUILTIN_CJK_FONT = "STSong-Light"
EMBEDDED_PREFIX = "CJK-"  # registered names of embedded CJK fonts start with this
PROBE_CHAR = "中"  # U+4E2D: a font without it cannot set Chinese
FC_PATTERN = ":lang=zh-cn"  # plain ":lang=zh" matches no CJK font's langset in fontconfig
MAX_CANDIDATES = 12  # fontconfig lists every font; only the first few claiming zh-cn are tried
FC_TIMEOUT_S = 20.0
SHIPPED_CJK_FONT = Path(__file__).resolve().parent / "fontdata" / "wqy-microhei-gb2312.ttf"

FALLBACK_WARNING = (
    "no CJK TrueType font found ({tried}; the font shipped with capplan, {shipped}: {problem}); "
    "Chinese text falls back to STSong-Light, which is not embedded: viewers without Adobe's "
    "Asian font pack (browser PDF viewers, poppler-based Linux viewers such as Evince and "
    "Okular, many mobile apps) show it blank or as boxes. "
    "Fix: reinstall capplan, install a CJK TrueType font (Debian/Ubuntu: apt-get install "
    f"fonts-wqy-microhei) or pass --cjk-font PATH (or set {ENV_VAR}) to a .ttf/.ttc font with "
    "Chinese glyphs."
)


@dataclass(frozen=True)
class CjkFont:
    """A registered reportlab font for Chinese text; `path` is None for the built-in one."""

    name: str
    path: Path | None
    face_index: int
    warning: str | None = None

    @property
    def embedded(self) -> bool:
        return self.path is not None


def is_cjk_font(name: str) -> bool:
    """Whether a registered font name is one this module chose for Chinese text."""
    return name == BUILTIN_CJK_FONT or name.startswith(EMBEDDED_PREFIX)


def builtin_cjk_font(warning: str | None = None) -> CjkFont:
    """STSong-Light, registered with reportlab (not embedded in the PDF)."""
    if BUILTIN_CJK_FONT not in pdfmetrics.getRegisteredFontNames():
        pdfmetrics.registerFont(UnicodeCIDFont(BUILTIN_CJK_FONT))
    return CjkFont(BUILTIN_CJK_FONT, None, 0, warning)


def choose_cjk_font(
    path: str | Path | None = None, *, environ: Mapping[str, str] | None = None
) -> CjkFont:
    """The font for Chinese text, registered with reportlab, in the module's lookup order.

    `path` is the --cjk-font option; `environ` defaults to os.environ. An explicit font (option
    or environment variable) that is missing, unreadable by reportlab or without Chinese glyphs
    raises InputError naming it; a system font that fails the same checks is skipped, and
    without one the shipped font is used. Only when that is unusable too, returns STSong-Light
    with `warning` set (the caller shows it).
    """
    env = os.environ if environ is None else environ
    explicit, origin = (
        (path, "--cjk-font ") if path is not None else (env.get(ENV_VAR), ENV_VAR + "=")
    )
    if explicit:
        font_path = Path(explicit).expanduser()
        font, problem = _load(font_path, 0)
        if font is None:
            raise InputError(f"{origin}{font_path}: {problem}")
        return font
    candidates = _fontconfig_candidates()
    for file, index in candidates:
        font, _ = _load(file, index)
        if font is not None:
            return font
    font, problem = _load(SHIPPED_CJK_FONT, 0)
    if font is not None:
        return font
    if shutil.which("fc-match") is None:
        tried = "fontconfig's fc-match is not installed"
    elif candidates:
        tried = f"fontconfig offered {', '.join(str(f) for f, _ in candidates)}, none usable"
    else:
        tried = "fontconfig knows no font that covers zh-cn"
    warning = FALLBACK_WARNING.format(tried=tried, shipped=SHIPPED_CJK_FONT, problem=problem)
    return builtin_cjk_font(warning)


def _load(path: Path, index: int) -> tuple[CjkFont | None, str]:
    """Register face `index` of the font file; (None, why) when it cannot set Chinese."""
    if not path.is_file():
        return None, "no such font file"
    digest = hashlib.sha256(f"{path.resolve()}#{index}".encode()).hexdigest()[:10]
    name = f"{EMBEDDED_PREFIX}{path.stem}-{index}-{digest}"
    if name in pdfmetrics.getRegisteredFontNames():
        return CjkFont(name, path, index), ""
    try:
        font = TTFont(name, str(path), subfontIndex=index)
    except (TTFError, OSError) as err:
        return None, (
            f"reportlab cannot read it ({err}); it needs TrueType outlines (.ttf, or .ttc "
            "with a face index): OpenType fonts with CFF outlines are not supported"
        )
    if ord(PROBE_CHAR) not in font.face.charToGlyph:
        return None, f"the font has no Chinese glyphs (no U+{ord(PROBE_CHAR):04X} in its cmap)"
    pdfmetrics.registerFont(font)
    return CjkFont(name, path, index), ""


def _fontconfig_candidates() -> list[tuple[Path, int]]:
    """Font files (with face index) that fontconfig prefers for zh-cn and says cover it."""
    fc_match = shutil.which("fc-match")
    if fc_match is None:
        return []
    try:
        done = subprocess.run(
            [fc_match, "-s", "--format", "%{file}\t%{index}\t%{lang}\n", FC_PATTERN],
            capture_output=True,
            text=True,
            timeout=FC_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    out: list[tuple[Path, int]] = []
    for line in done.stdout.splitlines():
        file, _, rest = line.partition("\t")
        index, _, langs = rest.partition("\t")
        if "zh-cn" not in langs.split("|") or not index.isdigit():
            continue
        candidate = (Path(file), int(index) & 0xFFFF)  # high bits: a variable font's instance
        if candidate not in out:
            out.append(candidate)
        if len(out) == MAX_CANDIDATES:
            break
    return out
