"""The planner's findings in a report's words: every key the planner can write has a Chinese
wording over the same figures, with no English sentence in it, and English reads as stored."""

from __future__ import annotations

from contracts.finding import FINDINGS_EN, Finding, FindingValue, template_fields
from reports.i18n import Words
from reports.i18n.findings import FINDINGS_ZH, finding_text
from testkit.pdf_check import english_runs

# A figure or name for every value a wording uses.
SAMPLE: dict[str, FindingValue] = {
    "level": 0.9, "low": 3, "high": 6, "dominant": "peak", "growth": 1.4,
    "horizon": "2027-03-31", "assumed": 1.2, "kv": 0.12, "gpu": "H100-80GB", "tp": 1,
    "verdict": "n=5 meets the SLO", "burst": 2.1, "headroom": 0.2, "limit": "2.5rps", "top": 5,
    "delay_s": 120.0, "model": "exponential", "weeks": 6, "r2": 0.93, "other_model": "linear",
    "r2_other": 0.9, "weekly": 0.03, "ahead": 11.5, "instances": 5, "gpus": 5,
    "monthly_usd": 10914.0, "price": 2.99, "peak_rps": 5.85, "peak_definition": "p99",
    "redundancy": 1, "cores_base": 4, "cores_per_gpu": 8, "ram_base": 16.0,
    "ram_per_memory": 2.0, "e2e_s": 4.2, "capacity": 430000, "needed": 500000.0,
    "missing": "itl", "simulated": "ttft, tpot, e2e", "levels": 6, "mfu": 0.41, "mbu": 0.77,
    "overhead_ms": 3.1, "mean_err": 0.05, "max_err": 0.12, "default_err": 0.3,
    "metrics": "ttft_p95_s, tpot_p95_s", "routings": "least_outstanding", "below": 4,
    "ideal": 0.65, "replayed": 0.6, "alt_tokens": 860000, "dtype": "fp8", "base_tokens": 430000,
    "share": 0.8, "need": 344000.0, "max_len": 8192, "seqs": 52, "ctx": 1400.0,
    "running": 96.7, "rate": 17.4, "fmt": "fp8", "base_fmt": "none", "alt_gb": 70.6,
    "base_gb": 141.1,
    "short_max": 512, "base_short": "0.41 s", "alt_short": "0.30 s", "long_min": 8192,
    "base_long": "2.10 s", "alt_long": "2.60 s", "gain": 2.31, "positions": 4, "drafts": 3,
    "mean_in": 1200.0, "base": 430000, "alt": 520000, "mean_out": 200.0, "mb": 157.3,
    "ms": 3.15, "base_ttft": "0.52 s", "base_tpot": "21 ms", "alt_ttft": "0.61 s",
    "alt_tpot": "18 ms", "engine": "vllm", "us": 45.0, "missed": 3.65, "minutes": 60.0,
    "limit_rps": 10.0,
    "serving": 3, "planned": 3, "slo": "ttft:p95<=1s", "burst_s": 30.0, "attainment": 0.99,
    "sim_attainment": 1.0, "recovery": 14.0, "reason": "the steady window was too short",
    "warmup_s": 120.0, "duration_s": 120.0,
}  # fmt: skip
# an old plan's verdict, stored in English only; a verify's reason (the steady-state rules'
# evidence, in English) inside a Chinese sentence
ENGLISH_BY_DESIGN = {"risk.fleet_check", "verify.invalid"}


def _sample(key: str) -> Finding:
    return Finding(key=key, values={k: SAMPLE[k] for k in template_fields(FINDINGS_EN[key])})


def test_every_finding_is_worded_in_chinese_over_the_same_figures() -> None:
    assert FINDINGS_ZH.keys() == FINDINGS_EN.keys()
    zh = Words("zh")
    for key, template in FINDINGS_ZH.items():
        assert template_fields(template) <= template_fields(FINDINGS_EN[key]), key
        text = finding_text(zh, _sample(key), "stored English")
        if key not in ENGLISH_BY_DESIGN:
            assert not english_runs(text), f"{key}: {text}"


def test_english_reads_as_the_stored_text() -> None:
    en = Words("en")
    finding = _sample("risk.kv_headroom")
    assert finding.english() == "KV cache headroom at the limit is 12% on H100-80GB x 1"
    assert finding_text(en, finding, "as stored") == "as stored"
    assert finding_text(Words("zh"), None, "as stored") == "as stored"
    zh = finding_text(Words("zh"), finding, "as stored")
    assert zh == "在上限处 KV 缓存余量为 12%（H100-80GB x 1）"
