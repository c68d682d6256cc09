"""The "Which configuration" report's lessons for single candidates: a limit latency sets,
a board without a public price, candidates that cannot run (and why), an engine ranking, and
a predicted limit's interval kept whole on its line (the section as a whole is
test_which_report.py's)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pypdf import PdfReader

from tests.reports.test_which_report import _text
from tests.reports.which_inputs import run_cli


def test_a_limit_latency_sets_is_explained_in_both_languages(tmp_path: Path) -> None:
    """An A10 on the chat preset at ttft:p95 <= 1.3 s: an idle instance already takes about
    1.13 s (the prefill of the p95 prompt), so latency, not throughput, sets its limit; the
    report's lessons say so with the JSON's figures, in English and Chinese."""
    candidate, texts = _chat_whatif_reports(tmp_path, "ttft:p95<=1.3s", "A10-24GB", "60")
    (near,) = candidate["near_floors"]
    assert near["constraint"] == "ttft:p95" and 1.05 <= near["floor_s"] <= 1.2
    floor = f"{near['floor_s']:.3g} s"
    tokens = f"{near['prompt_tokens']:,}"
    for lang, words in (("en", "Latency, not throughput, sets the limit of"),
                        ("zh", "的上限由延迟而非吞吐决定")):  # fmt: skip
        assert words in texts[lang], texts[lang]
        assert floor in texts[lang] and tokens in texts[lang]


def _chat_whatif_reports(
    tmp_path: Path, slo: str, gpu: str, level_s: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """whatif's one candidate on the chat preset, and its "Which configuration" report's text
    in English and Chinese."""
    profile = tmp_path / "chat.json"
    run_cli("profile", "--preset", "chat", "-o", str(profile), "--quiet")
    whatif = tmp_path / "whatif.json"
    run_cli(
        "whatif", "--profile", str(profile), "--slo", slo, "--gpu", gpu,
        "--level-duration", level_s, "-o", str(whatif),
    )  # fmt: skip
    (candidate,) = json.loads(whatif.read_text())["candidates"]
    texts = {}
    for lang in ("en", "zh"):
        out = tmp_path / f"{lang}.pdf"
        run_cli("report", "--whatif", str(whatif), "--lang", lang, "-o", str(out))
        texts[lang] = _text(out)[0]
    return candidate, texts


def test_a_board_with_no_price_keeps_its_predicted_limit_on_the_first_page(tmp_path: Path) -> None:
    """An H100 NVL has no public price on file: whatif ranks nothing, and the report's first
    page still says its limit is predicted, not measured, with the interval, and why it has
    no cost, in English and Chinese. Fails if the unpriced candidate is left unexplained."""
    candidate, texts = _chat_whatif_reports(tmp_path, "ttft:p95<=2s", "NVIDIA H100 NVL", "30")
    assert candidate["rank"] is None and candidate["limit_rps"] > 0
    interval = [f"{candidate[k]:.3g} req/s" for k in ("limit_low_rps", "limit_high_rps")]
    for lang, words in (("en", ("Predicted, not measured", "no public price on file")),
                        ("zh", ("预测值,未经实测", "没有公开价格记录"))):  # fmt: skip
        text = texts[lang]
        assert all(w in text for w in (*words, *interval)), text
        assert "H100-NVL-94GB tp1" in text


def test_candidates_that_cannot_run_say_why_and_the_slo_is_in_words(tmp_path: Path) -> None:
    """nvfp4 on an H100 (no FP4 cores) and Llama-3.1-70B in bf16 on one H100 (does not fit):
    the report said both "meet the SLO at no load". It now names each reason (whatif.json's
    cannot_run, and the shortfall in GB from its short_gb_per_gpu), and the first page gives
    the SLO in words beside its grammar, in English and Chinese (a bug hunt found all
    three)."""
    profile = tmp_path / "chat.json"
    run_cli("profile", "--preset", "chat", "-o", str(profile), "--quiet")
    slo = ["--slo", "ttft:p95<=2s,tpot:p95<=100ms", "--level-duration", "30"]
    cases = {
        "fp4": ["--gpu", "H100-80GB,B200", "--quantization", "nvfp4"],
        "fit": ["--gpu", "H100-80GB", "--model", "llama-3.1-70b", "--tp", "1,4"],
    }
    for name, flags in cases.items():
        whatif = tmp_path / f"{name}.json"
        run_cli("whatif", "--profile", str(profile), *slo, *flags, "-o", str(whatif))
        (bad,) = [c for c in json.loads(whatif.read_text())["candidates"] if not c["limit_rps"]]
        short = re.search(r"([\d.]+) GB short", bad["problem"])
        # the reason is a field of whatif.json, and its shortfall the figure the problem says
        assert bad["cannot_run"] == name, bad
        if name == "fit":
            assert short is not None and f"{bad['short_gb_per_gpu']:.1f}" == short.group(1)
        for lang in ("en", "zh"):
            out = tmp_path / f"{name}-{lang}.pdf"
            run_cli("report", "--whatif", str(whatif), "--lang", lang, "-o", str(out))
            text = _text(out)[0].replace(" ", "")
            if name == "fp4":
                want = {"en": ["noFP4cores", "nvfp4needsFP4tensorcores,whichthisGPUhasnot"],
                        "zh": ["无FP4核心", "nvfp4需要FP4张量核心,这块GPU没有"]}[lang]  # fmt: skip
            else:
                assert short is not None, bad["problem"]
                want = {"en": ["doesnotfit", f"({short.group(1)}GBshortperGPU"],
                        "zh": ["显存放不下", f"每块GPU还差{short.group(1)}GB"]}[lang]  # fmt: skip
            words = {"en": "95%ofrequestsseethefirsttokenwithin2s",
                     "zh": "95%的请求在2s内收到首个"}[lang]  # fmt: skip
            assert all(w in text for w in (*want, words)), (name, lang, text)
            assert "meetstheSLOatnoload" not in text and "任何负载下都达不到" not in text
            # a predicted limit's interval sits whole on a line of its own (in Chinese a line
            # may break anywhere: the bug hunt saw "(6.74–2" / "2.8)")
            lines = PdfReader(out).pages[0].extract_text().splitlines()
            for c in json.loads(whatif.read_text())["candidates"]:
                if c["limit_rps"]:
                    lo, hi = (f"{c[k]:.3g}" for k in ("limit_low_rps", "limit_high_rps"))
                    assert any(f"({lo}–{hi})" in line for line in lines), (lang, lines)


def test_an_engine_ranking_is_said_in_words_not_as_no_prediction(tmp_path: Path) -> None:
    """whatif's "engine ranking" lessons (where one engine leads by more than 10 %) have no
    limit change of their own; the report rendered them as knob lessons, "engine ranking:
    trtllm instead of vllm: no prediction". They now read as a ranking, in both languages."""
    profile = tmp_path / "chat.json"
    run_cli("profile", "--preset", "chat", "-o", str(profile), "--quiet")
    whatif = tmp_path / "w.json"
    run_cli(
        "whatif", "--profile", str(profile), "--slo", "ttft:p95<=2s", "--gpu", "H100-80GB",
        "--engine", "trtllm,vllm", "--level-duration", "30", "-o", str(whatif),
    )  # fmt: skip
    data = json.loads(whatif.read_text())
    data["lessons"].append(
        {"knob": "engine ranking", "baseline": "vllm", "alternative": "trtllm",
         "limit_change": None, "pairs": 2, "figure": "6 req/s: ...; 5 req/s: ...",
         "where": "H100-80GB tp1",
         "sentence": "on H100-80GB tp1, trtllm ranks first: 6 req/s: ...; 5 req/s: ..."}
    )  # fmt: skip
    whatif.write_text(json.dumps(data))
    for lang, said in (("en", "On H100-80GB tp1, trtllm ranks first, more than 10 % above"),
                       ("zh", "在 H100-80GB tp1 上,trtllm 排名第一")):  # fmt: skip
        out = tmp_path / f"{lang}.pdf"
        run_cli("report", "--whatif", str(whatif), "--lang", lang, "-o", str(out))
        text = _text(out)[0]
        assert said in text, (lang, text)
        assert "engine ranking" not in text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_predicted_limit_s_interval_never_breaks_across_lines(lang: str) -> None:
    """The ranked table's limit cell, laid out at its column's width for limits and intervals
    of one to three digits: the interval "(lo–hi)" always sits whole on one line. With the
    limit and interval in one run of text, 16 of these 60 cells broke inside the interval in
    Chinese (a bug hunt saw "(6.74–2" / "2.8)")."""
    import itertools

    from reports import words_for
    from reports.layout import CONTENT_W, Layout
    from reports.pages.which import _limit_cell
    from reports.which_data import WhichRow

    layout = Layout(words_for(lang))
    width = CONTENT_W * 0.14 / 0.99 - 8  # the column (whatif, uncalibrated) less its padding
    values = itertools.product([1.51, 3.66, 12.7, 21.7, 118.0], [0.52, 1.04, 6.74, 15.1],
                               [1.75, 22.8, 24.7, 167.0])  # fmt: skip
    for limit, low, high in values:
        row = WhichRow(
            label="c", gpu="H100-80GB", limit=limit, unit="rps", binding=None, instances=1,
            gpus=1, monthly_cost_usd=None, usd_per_million_output_tokens=None, rank=None,
            calibration_error=None, pareto=True, problem=None, limit_low=low, limit_high=high,
        )  # fmt: skip
        cell = _limit_cell(layout, row)
        assert not isinstance(cell, str)
        cell.wrap(width, 1000)
        lines = [str(line) for line in cell.blPara.lines]  # type: ignore[attr-defined]
        interval = f"({layout.words.num(low)}–{layout.words.num(high)})"
        assert any(interval in line for line in lines), (limit, low, high, lines)
