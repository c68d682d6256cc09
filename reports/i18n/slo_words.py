"""The SLO in words, beside its grammar, for readers who do not read `ttft:p95<=2s`: "95 % of
requests see the first token within 2 s" (and in Chinese), from the plan's typed SLO terms
(contracts.plan.SloTerm, written by the planner from the parsed SLO; never re-parsed here).
"""

from __future__ import annotations

from collections.abc import Sequence

from contracts.plan import SloTerm
from reports.i18n.words import Words

# What each latency bound promises, per language: {who} is the requests it holds for.
_PROMISE = {
    "en": {
        "ttft": "{who} see the first token within {t}",
        "tpot": "{who} stream each further token within {t} on average",
        "e2e": "{who} finish within {t}",
        "itl_max": "{who} wait at most {t} between two tokens",
    },
    "zh": {
        "ttft": "{who}在 {t} 内收到首个 token",
        "tpot": "{who}平均每个后续 token 不超过 {t}",
        "e2e": "{who}在 {t} 内完成",
        "itl_max": "{who}相邻 token 间隔不超过 {t}",
    },
}
_WHO = {
    "en": {"share": "{q} of requests", "mean": "requests on average", "max": "all requests"},
    "zh": {"share": "{q} 的请求", "mean": "请求平均", "max": "所有请求"},
}
_ERRORS = {"en": "at most {q} of requests fail", "zh": "失败的请求不超过 {q}"}
_AND = {"en": "; ", "zh": ";"}


def _share(value: float) -> str:
    return f"{value * 100:g} %"


def _who(lang: str, term: SloTerm) -> str:
    who = _WHO[lang]
    if term.share is not None:
        return who["share"].format(q=_share(term.share))
    if term.stat in ("mean", "max"):
        return who[term.stat]
    quantile = float((term.stat or "p100")[1:]) / 100
    return who["share"].format(q=_share(quantile))


def slo_in_words(words: Words, terms: Sequence[SloTerm]) -> str:
    """The SLO's terms as one sentence in `words`' language; "" for none (an older plan)."""
    lang = words.lang
    parts = []
    for term in terms:
        if term.metric == "errors":
            parts.append(_ERRORS[lang].format(q=_share(term.threshold)))
        elif term.metric in _PROMISE[lang]:
            promise = _PROMISE[lang][term.metric]
            parts.append(promise.format(who=_who(lang, term), t=words.seconds(term.threshold)))
    return _AND[lang].join(parts)


def slo_stated(words: Words, spec: str, terms: Sequence[SloTerm]) -> str:
    """The SLO's grammar with its words beside it: "ttft:p95<=2s (95 % of requests see the
    first token within 2 s)"; the grammar alone without terms (an older file)."""
    said = slo_in_words(words, terms)
    if not said:
        return spec
    return f"{spec} ({said})" if words.lang == "en" else f"{spec}({said})"
