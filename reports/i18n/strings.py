"""Every string of the capacity-baseline report, per language: STRINGS[lang][key].

English and Chinese hold the same keys (a test checks it). The pages' words live in one module
per language (`en`, `zh`); the "Which configuration" section's in `which`, and what a run and a
search did beyond their plan in `run_words`, and the fleet-verification page's in
`verify_words`, and a predicted limit's interval in `predicted_words`, both languages.
"""

from __future__ import annotations

from reports.i18n.en import EN
from reports.i18n.predicted_words import PREDICTED_EN, PREDICTED_ZH
from reports.i18n.run_words import RUN_EN, RUN_ZH
from reports.i18n.verify_words import VERIFY_EN, VERIFY_ZH
from reports.i18n.which import WHICH_EN, WHICH_ZH
from reports.i18n.zh import ZH

STRINGS: dict[str, dict[str, str]] = {
    "en": {**EN, **WHICH_EN, **RUN_EN, **VERIFY_EN, **PREDICTED_EN},
    "zh": {**ZH, **WHICH_ZH, **RUN_ZH, **VERIFY_ZH, **PREDICTED_ZH},
}
