"""Profiles of the shared public traces reproduce their published figures; built logs too."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from profiles.build import build_profile
from profiles.model import WINDOWS


def test_azure_conv_published_figures(shared_data: Path) -> None:
    p = build_profile([str(shared_data / "AzureLLMInferenceTrace_conv.csv")])
    assert p.source.format == "azure"
    assert p.source.rows == 19366 and p.source.rows_skipped == 0
    assert p.lengths.input.mean == pytest.approx(1154.7, abs=0.05)
    assert p.lengths.input.p50 == 1020
    assert p.lengths.output.mean == pytest.approx(211.1, abs=0.05)
    assert p.lengths.output.p50 == 129
    assert p.arrivals.mean_rate_rps == pytest.approx(5.53, abs=0.01)
    assert p.source.first_timestamp is not None
    assert p.source.first_timestamp.startswith("2023-11-16T18:15:46")
    for w in WINDOWS:
        assert len(p.arrivals.window_rate_percentiles[w]) == 101
        assert p.arrivals.peak_rate_rps[w] >= p.arrivals.mean_rate_rps
        assert p.arrivals.peak_to_mean[w] > 1
    # Peaks over shorter windows are higher; one hour is too short for a daily shape.
    assert p.arrivals.peak_rate_rps["1s"] > p.arrivals.peak_rate_rps["10s"]
    assert p.arrivals.hour_of_day is None and p.arrivals.weekday is None
    assert p.arrivals.interarrival_cv == pytest.approx(1.09, abs=0.05)
    assert p.prefix.available is False
    assert len(p.lengths.sampler.pairs) == 2000
    assert sum(p.lengths.input.histogram.counts) == 19366


def test_mooncake_published_figures(shared_data: Path) -> None:
    p = build_profile([str(shared_data / "mooncake_synthetic_trace.jsonl")])
    assert p.source.format == "mooncake"
    assert p.lengths.input.mean == pytest.approx(15325, abs=1)
    assert p.lengths.output.mean == pytest.approx(149, abs=0.5)
    assert p.prefix.block_tokens == 512
    assert p.prefix.hashes_from == "hash_ids"
    assert p.prefix.ideal_hit_ratio == pytest.approx(0.65, abs=0.01)
    curve = [pt.hit_ratio for pt in p.prefix.lru_hit_ratio]
    assert curve == sorted(curve)
    assert curve[0] < 0.05
    assert curve[-1] == pytest.approx(p.prefix.ideal_hit_ratio)
    assert p.prefix.top_prefixes and p.prefix.top_prefixes[0].request_share > 0


def test_burstgpt_zero_response_rows_are_failures(shared_data: Path) -> None:
    path = shared_data / "burstgpt_head42.csv"
    with path.open() as fh:
        rows = list(csv.DictReader(fh))
    failed = sum(1 for r in rows if int(r["Response tokens"]) == 0)
    p = build_profile([str(path)])
    assert p.source.format == "burstgpt"
    assert p.source.rows == 42
    assert p.ok_share == pytest.approx(1 - failed / 42)
    assert p.lengths.requests == 42 - failed
    grouped = build_profile([str(path)], group_by="model")
    assert sum(g.requests for g in grouped.groups.values()) == 42
    assert set(grouped.groups) == {r["Model"] for r in rows}


def test_openai_log_hit_ratio_known_by_construction(openai_log) -> None:
    path, expected, facts = openai_log(n=300)
    p = build_profile([str(path)], cache_tokens=[1024, 1 << 30])
    assert p.source.format == "openai-jsonl"
    assert p.source.tokens_estimated is False
    assert p.prefix.hashes_from == "prompt text"
    assert p.prefix.ideal_hit_ratio == pytest.approx(expected, abs=1e-12)
    assert p.prefix.lru_hit_ratio[-1].hit_ratio == pytest.approx(expected, abs=1e-12)
    assert p.prefix.lru_hit_ratio[0].hit_ratio < expected
    assert facts["largest_system"] in {sp.prefix_tokens for sp in p.prefix.top_prefixes}
    # The three system prompts are the three shared prefixes; every request starts with one.
    assert len(p.prefix.top_prefixes) == 3
    assert p.prefix.top_prefixes_request_share == pytest.approx(1.0)
    assert p.prefix.reported_cached_token_ratio == 0.0
    assert p.sessions.available and p.sessions.count == 7
    assert p.source.first_timestamp is not None


def test_openai_log_without_usage_counts_tokens(openai_log) -> None:
    path, expected, _ = openai_log(n=60, seed=3, usage=False)
    p = build_profile([str(path)], group_by="model")
    assert p.source.tokens_estimated is True
    assert p.source.tokenizer == "approx-4chars"
    assert p.prefix.ideal_hit_ratio == pytest.approx(expected, abs=1e-12)
    assert set(p.groups) == {"m1", "m2"}
    assert p.groups["m1"].requests == 30


def test_group_by_a_table_column(tmp_path: Path) -> None:
    f = tmp_path / "g.csv"
    f.write_text("t,i,o,region\n0,5,1,eu\n1,6,2,us\n2,7,3,eu\n3,8,4,us\n4,9,5,eu\n")
    p = build_profile([str(f)], columns="arrival=t,input=i,output=o", group_by="region")
    assert p.group_by == "region"
    assert {k: g.requests for k, g in p.groups.items()} == {"eu": 3, "us": 2}
    assert p.groups["eu"].lengths.input.mean == pytest.approx(7)


def test_openai_iso_timestamps_and_prompt_strings(tmp_path: Path) -> None:
    from testkit.logs import write_jsonl

    f = write_jsonl(
        tmp_path / "c.jsonl",
        [
            {
                "created_at": f"2024-03-01T10:00:0{i}+00:00",
                "prompt": "shared instructions " * 40 + f"question {i}",
                "usage": {"prompt_tokens": 90 + i, "completion_tokens": 3},
                "status_code": 200 if i != 4 else 500,
            }
            for i in range(1, 6)
        ],
    )
    p = build_profile([str(f)])
    assert p.source.format == "openai-jsonl"
    assert p.source.first_timestamp == "2024-03-01T10:00:01+00:00"
    assert p.arrivals.duration_s == pytest.approx(4.0)
    assert p.ok_share == pytest.approx(0.8)
    # 4 of 5 prompts repeat the first one's shared blocks.
    assert p.prefix.ideal_hit_ratio is not None and p.prefix.ideal_hit_ratio > 0.5


def test_hugging_face_tokenizer_counts_text(tmp_path: Path, openai_log) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    from profiles.tokenize import _VOCAB

    vocab = {w: i for i, w in enumerate(["[UNK]", *_VOCAB])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    path_tok = tmp_path / "tokenizer.json"
    tok.save(str(path_tok))
    path, expected, _ = openai_log(n=40, seed=5, usage=False)
    p = build_profile([str(path)], tokenizer=str(path_tok))
    assert p.source.tokenizer == "hf:tokenizer.json"
    assert p.source.tokens_estimated is True
    # Each synthetic word is one token for both tokenizers, so the construction still holds.
    assert p.prefix.ideal_hit_ratio == pytest.approx(expected, abs=1e-12)


def test_mooncake_names_no_tokenizer(shared_data: Path) -> None:
    p = build_profile([str(shared_data / "mooncake_synthetic_trace.jsonl")])
    assert p.source.tokenizer is None and p.source.tokens_estimated is False


def test_same_log_same_profile(openai_log) -> None:
    path, _, _ = openai_log(n=120, seed=8)
    a = build_profile([str(path)], group_by="session_id", seed=4)
    b = build_profile([str(path)], group_by="session_id", seed=4)
    assert a.model_copy(update={"created_at": ""}) == b.model_copy(update={"created_at": ""})
    assert list(a.groups) == list(b.groups)
