"""The report's words in English and Chinese, its fonts per language, and number formatting.

Every label, heading and sentence of the PDF comes from STRINGS (`reports.i18n.strings`, one
module per language); `Words` (`reports.i18n.words`) gives one language's strings, fonts and
number formats.
"""

from __future__ import annotations

from reports.i18n.strings import STRINGS
from reports.i18n.words import LANGS, LATIN_FONT, Lang, Words, split_runs

__all__ = ["LANGS", "LATIN_FONT", "STRINGS", "Lang", "Words", "split_runs"]
