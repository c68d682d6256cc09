"""Rendering only: charts and the PDF capacity baseline from finished results (en, zh).

Public entry points: `render_report(profile_path, run_dir, plan_path, out_pdf, ...)`, and
`words_for(lang, ...)`, the words and fonts any PDF of capplan is set with (a Chinese one embeds
its CJK font; see `reports.fonts`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from reports.fonts import CjkFont
from reports.i18n import LANGS, Lang, Words


def warn_on_stderr(message: str) -> None:
    """The default way a report tells its user about a problem that still lets it render."""
    print(f"warning: {message}", file=sys.stderr)


def words_for(
    lang: Lang | str,
    *,
    cjk_font: str | Path | CjkFont | None = None,
    warn: Callable[[str], None] = warn_on_stderr,
) -> Words:
    """The words and fonts of a document in `lang`; every PDF of capplan starts here.

    For Chinese, the font is `cjk_font` (a font file, or one already chosen and warned about
    by the caller) or the one `reports.fonts.choose_cjk_font` finds; when that falls back to
    the non-embedded STSong-Light, `warn` is called once with the reason and the fix. English
    never looks for a font. Raises InputError for an unknown language or an unusable font.
    """
    from contracts.errors import InputError
    from reports.fonts import choose_cjk_font

    if lang not in LANGS:
        raise InputError(f"unknown language {lang!r}; expected one of {', '.join(LANGS)}")
    if lang != "zh":
        return Words("en")
    if isinstance(cjk_font, CjkFont):
        return Words("zh", cjk_font=cjk_font.name)
    font = choose_cjk_font(cjk_font)
    if font.warning is not None:
        warn(font.warning)
    return Words("zh", cjk_font=font.name)


def render_report(
    profile_path: str | Path,
    run_dir: str | Path,
    plan_path: str | Path,
    out_pdf: str | Path,
    *,
    previous_plan: str | Path | None = None,
    lang: Lang | str = "en",
    limit_path: str | Path | None = None,
    generated_at: datetime | None = None,
    cjk_font: str | Path | CjkFont | None = None,
    warn: Callable[[str], None] = warn_on_stderr,
) -> Path:
    """Write the capacity-baseline PDF and return its path.

    Reads the profile JSON, the run directory (run.json, stages.json, records.parquet,
    server_metrics.parquet when present), limit.json (run_dir/limit.json unless limit_path is
    given), plan.json and, optionally, the previous plan for the comparison table. `lang` is
    "en" or "zh". A Chinese report embeds a subset of its CJK font (`words_for`: `cjk_font`
    or the system's; `warn` hears about a fallback to the non-embedded STSong-Light). Raises
    InputError (exit code 2 in the CLI) for a missing or malformed input, an unusable
    `cjk_font` or an unknown language.
    """
    from reports.data import load_inputs
    from reports.pdf import build_pdf

    words = words_for(lang, cjk_font=cjk_font, warn=warn)
    inputs = load_inputs(
        Path(profile_path),
        Path(run_dir),
        Path(plan_path),
        previous_plan=Path(previous_plan) if previous_plan is not None else None,
        limit_path=Path(limit_path) if limit_path is not None else None,
    )
    return build_pdf(inputs, Path(out_pdf), words, generated_at or datetime.now(UTC))


__all__ = ["CjkFont", "render_report", "warn_on_stderr", "words_for"]
