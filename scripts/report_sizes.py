"""Print the size and page count of the capacity-baseline PDF of the test fixture
(testkit/report_inputs.py): English, Chinese with the embedded CJK font `capplan report`
would choose, and Chinese in reportlab's built-in STSong-Light (not embedded). The README's
figures on font embedding come from this script.

Run: `.venv/bin/python scripts/report_sizes.py [--cjk-font PATH]`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pypdf import PdfReader  # noqa: E402

from reports import render_report  # noqa: E402
from reports.fonts import builtin_cjk_font, choose_cjk_font  # noqa: E402
from testkit.report_inputs import write_fixture  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cjk-font", default=None, help="as capplan report --cjk-font")
    args = ap.parse_args()
    chosen = choose_cjk_font(args.cjk_font)
    cases = [
        ("en", "en", None, "-"),
        ("zh", "zh", chosen, chosen.name if chosen.path else f"{chosen.name} (no font found)"),
        ("zh-builtin", "zh", builtin_cjk_font(), "STSong-Light (built in, not embedded)"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_fixture(Path(tmp))
        for name, lang, font, described in cases:
            pdf = render_report(
                paths.profile,
                paths.run_dir,
                paths.plan,
                Path(tmp) / f"report-{name}.pdf",
                previous_plan=paths.previous,
                lang=lang,
                cjk_font=font,
                warn=lambda _message: None,
            )
            pages = len(PdfReader(pdf).pages)
            print(f"{name:<11} {pdf.stat().st_size:>9,} bytes  {pages} pages  font {described}")


if __name__ == "__main__":
    main()
