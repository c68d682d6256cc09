"""Rendering only: charts and the PDF capacity baseline from finished results (en, zh).

Public entry points: `render_report(profile_path, run_dir, plan_path, out_pdf, ...)` (with
`whatif=`/`compare=` it adds the "Which configuration" section), `render_which_report(out_pdf,
...)` (that section alone), and `words_for(lang, ...)`, the words and fonts any PDF of capplan
is set with (a Chinese one embeds its CJK font; see `reports.fonts`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
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
    run_dir: str | Path | None,
    plan_path: str | Path,
    out_pdf: str | Path,
    *,
    previous_plan: str | Path | None = None,
    lang: Lang | str = "en",
    limit_path: str | Path | None = None,
    generated_at: datetime | None = None,
    cjk_font: str | Path | CjkFont | None = None,
    warn: Callable[[str], None] = warn_on_stderr,
    whatif: str | Path | None = None,
    compare: str | Path | None = None,
    verify: Sequence[str | Path] = (),
) -> Path:
    """Write the capacity-baseline PDF and return its path.

    Reads the profile JSON, the run directory (run.json, stages.json, records.parquet,
    server_metrics.parquet when present), limit.json (run_dir/limit.json unless limit_path is
    given), plan.json and, optionally, the previous plan for the comparison table. `run_dir`
    None: the plan's limit was given as a number, and the load-test and limit pages are left
    out (InputError when the plan's limit came from a limit.json). `lang` is
    "en" or "zh". A Chinese report embeds a subset of its CJK font (`words_for`: `cjk_font`
    or the system's, else the one shipped in the package; `warn` hears about a fallback to the
    non-embedded STSong-Light, which only a broken install gets). Raises
    InputError (exit code 2 in the CLI) for a missing or malformed input, an unusable
    `cjk_font` or an unknown language. `whatif` (capplan whatif's JSON) and `compare` (capplan
    compare's) add the "Which configuration" section before the method page; each `verify`
    (capplan verify's verify.json of this plan) adds to the fleet-verification page.
    """
    from reports.data import load_inputs
    from reports.pdf import build_pdf
    from reports.which_data import load_sections

    words = words_for(lang, cjk_font=cjk_font, warn=warn)
    inputs = load_inputs(
        Path(profile_path),
        Path(run_dir) if run_dir is not None else None,
        Path(plan_path),
        previous_plan=Path(previous_plan) if previous_plan is not None else None,
        limit_path=Path(limit_path) if limit_path is not None else None,
        verify_paths=[Path(p) for p in verify],
    )
    which = load_sections(_path(whatif), _path(compare))
    return build_pdf(inputs, Path(out_pdf), words, generated_at or datetime.now(UTC), which)


def _path(value: str | Path | None) -> Path | None:
    return Path(value) if value is not None else None


def render_which_report(
    out_pdf: str | Path,
    *,
    whatif: str | Path | None = None,
    compare: str | Path | None = None,
    lang: Lang | str = "en",
    generated_at: datetime | None = None,
    cjk_font: str | Path | CjkFont | None = None,
    warn: Callable[[str], None] = warn_on_stderr,
) -> Path:
    """Write a PDF of the "Which configuration" section alone and return its path.

    For a choice made before any run or plan exists: `whatif` (capplan whatif's JSON) and/or
    `compare` (capplan compare's). Raises InputError when neither is given, for a missing or
    malformed file, an unusable `cjk_font` or an unknown language.
    """
    from contracts.errors import InputError
    from reports.pdf import build_which_pdf
    from reports.which_data import load_sections

    if whatif is None and compare is None:
        raise InputError("give a whatif.json (--whatif) or a compare.json (--compare)")
    words = words_for(lang, cjk_font=cjk_font, warn=warn)
    sections = load_sections(_path(whatif), _path(compare))
    return build_which_pdf(sections, Path(out_pdf), words, generated_at or datetime.now(UTC))


__all__ = ["CjkFont", "render_report", "render_which_report", "warn_on_stderr", "words_for"]
