"""Rendering only: charts and the PDF capacity baseline from finished results (en, zh).

Public entry point: `render_report(profile_path, run_dir, plan_path, out_pdf, ...)`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from reports.fonts import CjkFont
from reports.i18n import LANGS, Lang


def warn_on_stderr(message: str) -> None:
    """The default way a report tells its user about a problem that still lets it render."""
    print(f"warning: {message}", file=sys.stderr)


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
    "en" or "zh". A Chinese report embeds a subset of `cjk_font` (a font file, or one already
    chosen) or of the font `reports.fonts.choose_cjk_font` finds; when it falls back to the
    non-embedded STSong-Light, `warn` is called once with the reason and the fix. Raises
    InputError (exit code 2 in the CLI) for a missing or malformed input, an unusable
    `cjk_font` or an unknown language.
    """
    from planner.errors import InputError
    from reports.data import load_inputs
    from reports.fonts import choose_cjk_font
    from reports.i18n import Words
    from reports.pdf import build_pdf

    if lang not in LANGS:
        raise InputError(f"unknown language {lang!r}; expected one of {', '.join(LANGS)}")
    words = Words(lang)  # type: ignore[arg-type]
    if lang == "zh":  # an English report never looks for a CJK font
        if isinstance(cjk_font, CjkFont):  # chosen (and warned about) by the caller
            font = cjk_font
        else:
            font = choose_cjk_font(cjk_font)
            if font.warning is not None:
                warn(font.warning)
        words = Words("zh", cjk_font=font.name)
    inputs = load_inputs(
        Path(profile_path),
        Path(run_dir),
        Path(plan_path),
        previous_plan=Path(previous_plan) if previous_plan is not None else None,
        limit_path=Path(limit_path) if limit_path is not None else None,
    )
    return build_pdf(inputs, Path(out_pdf), words, generated_at or datetime.now(UTC))


__all__ = ["CjkFont", "render_report", "warn_on_stderr"]
