"""OpenTelemetry GenAI traces (OTLP JSON) as a log format: a file of GenAI spans made from a
known Poisson rate and known length distributions profiles to that rate and those means; a
vLLM-shaped span keeps its latencies as observed ones; other spans are skipped and counted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from capplan.cli import app
from profiles.build import build_profile
from profiles.readers import detect_format, read_requests
from profiles.readers.otlp import NESTED, NOT_GENAI

RATE_RPS = 5.0
INPUT_MEAN, OUTPUT_MEAN = 500.0, 200.0  # geometric lengths: sd = sqrt(1 - p) / p
T0_NS = 1_765_000_000_000_000_000  # 2025-12-06, in unix nanoseconds


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}  # int64 as a string, as OTLP JSON
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": str(value)}}


def _span(trace: int, span: int, start_ns: int, attrs: dict[str, Any], **extra: Any) -> dict:
    return {
        "traceId": f"{trace:032x}",
        "spanId": f"{span:016x}",
        "name": extra.pop("name", "chat"),
        "kind": 3,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(start_ns + extra.pop("duration_ns", 2_000_000_000)),
        "attributes": [_attr(k, v) for k, v in attrs.items()],
        **extra,
    }


def _batch(spans: list[dict]) -> dict:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [_attr("service.name", "gateway")]},
                "scopeSpans": [
                    {"scope": {"name": "opentelemetry.instrumentation.openai"}, "spans": spans}
                ],
            }
        ]
    }


def made_spans(n: int, seed: int) -> tuple[list[dict], dict[str, int]]:
    """`n` GenAI requests at Poisson arrivals of RATE_RPS with geometric lengths, each under an
    HTTP server span, plus spans to skip; in export order (by end time), not arrival order."""
    rng = np.random.default_rng(seed)
    starts = T0_NS + np.cumsum(rng.exponential(1e9 / RATE_RPS, n)).astype(np.int64)
    ins = rng.geometric(1 / INPUT_MEAN, n)
    outs = rng.geometric(1 / OUTPUT_MEAN, n)
    spans, skipped = [], {NOT_GENAI: 0, "bad GenAI span": 0, NESTED: 0}
    for i in range(n):
        t = int(starts[i])
        spans.append(_span(i, 2 * i + 1, t - 1000, {"http.route": "/v1/chat"}, name="POST"))
        skipped[NOT_GENAI] += 1
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "llama" if i % 4 else "qwen",
            "gen_ai.usage.input_tokens": int(ins[i]),
            "gen_ai.usage.output_tokens": int(outs[i]),
        }
        spans.append(
            _span(
                i,
                2 * i + 2,
                t,
                attrs,
                parentSpanId=f"{2 * i + 1:016x}",
                duration_ns=int(rng.integers(1, 30)) * 10**9,
            )
        )
        if i % 100 == 0:  # the engine's own span of the same request: nested, skipped
            engine = {
                "gen_ai.usage.prompt_tokens": int(ins[i]),
                "gen_ai.usage.completion_tokens": 1,
            }
            spans.append(_span(i, 10**9 + i, t + 5, engine, parentSpanId=f"{2 * i + 2:016x}"))
            skipped[NESTED] += 1
        if i % 250 == 0:  # an embeddings call and a span with a broken count
            embed = {"gen_ai.operation.name": "embeddings", "gen_ai.usage.input_tokens": 9}
            spans.append(_span(i, 2 * 10**9 + i, t, embed))
            bad = {
                "gen_ai.operation.name": "chat",
                "gen_ai.usage.input_tokens": "many",
                "gen_ai.usage.output_tokens": 3,
            }
            spans.append(_span(i, 3 * 10**9 + i, t, bad))
            skipped["bad GenAI span"] += 2
    spans.sort(key=lambda s: int(s["endTimeUnixNano"]))
    return spans, skipped


def write_lines(path: Path, spans: list[dict], per_line: int = 50) -> Path:
    """The collector's file exporter: one resourceSpans object a line."""
    with path.open("w") as fh:
        for k in range(0, len(spans), per_line):
            fh.write(json.dumps(_batch(spans[k : k + per_line])) + "\n")
    return path


def test_genai_spans_profile_to_the_rate_and_means_they_were_made_from(tmp_path: Path):
    n = 4000
    spans, skipped = made_spans(n, seed=7)
    path = write_lines(tmp_path / "traces.jsonl", spans)
    assert detect_format(path) == "otlp"
    prof = build_profile([str(path)], group_by="model")
    assert prof.source.format == "otlp" and prof.requests == n
    # Sampling error: the mean rate's relative sd is 1/sqrt(n) (1.6 %); a geometric mean's
    # sd is sqrt(1 - p) / p / sqrt(n). Four sds either way.
    assert prof.arrivals.mean_rate_rps == pytest.approx(RATE_RPS, rel=4 / np.sqrt(n))
    for mean, got in (
        (INPUT_MEAN, prof.lengths.input.mean),
        (OUTPUT_MEAN, prof.lengths.output.mean),
    ):
        sd = np.sqrt(1 - 1 / mean) * mean / np.sqrt(n)
        assert abs(got - mean) < 4 * sd, (got, mean)
    assert prof.source.skip_reasons == {k: v for k, v in skipped.items() if v}
    assert prof.source.first_timestamp is not None
    assert prof.source.first_timestamp.startswith("2025-12-06")
    assert {g: b.requests for g, b in prof.groups.items()} == {"llama": 3000, "qwen": 1000}
    # Span durations (1 to 29 s, uniform) are the observed e2e without vLLM's attributes.
    e2e = prof.observed.latency["e2e"] if prof.observed else None
    assert e2e is not None and e2e.requests == n and e2e.mean_s == pytest.approx(15, abs=0.5)


def test_a_single_exported_document_reads_as_the_file_exporters_lines(tmp_path: Path):
    spans, _ = made_spans(600, seed=3)
    lines = write_lines(tmp_path / "lines.jsonl", spans)
    for name, doc in (
        ("tempo.json", {"batches": _batch(spans)["resourceSpans"]}),
        ("jaeger.json", {"result": _batch(spans)}),
    ):
        path = tmp_path / name
        path.write_text(json.dumps(doc, indent=2))  # pretty-printed, over many lines
        assert detect_format(path) == "otlp"
        a, b = read_requests([str(path)]), read_requests([str(lines)])
        assert a.frame.equals(b.frame) and a.skip_reasons == b.skip_reasons


VLLM_SPAN = {  # vLLM's llm_request span (vllm/tracing.py SpanAttributes), as OTLP JSON
    "traceId": "5b8efff798038103d269b633813fc60c",
    "spanId": "eee19b7ec3c1b174",
    "name": "llm_request",
    "kind": 2,
    "startTimeUnixNano": "1765000000250000000",
    "endTimeUnixNano": "1765000003750000000",
    "attributes": [
        {"key": "gen_ai.response.model", "value": {"stringValue": "meta-llama/Llama-3.1-8B"}},
        {"key": "gen_ai.request.id", "value": {"stringValue": "chatcmpl-9f2"}},
        {"key": "gen_ai.request.temperature", "value": {"doubleValue": 0.7}},
        {"key": "gen_ai.request.max_tokens", "value": {"intValue": "512"}},
        {"key": "gen_ai.usage.prompt_tokens", "value": {"intValue": "1234"}},
        {"key": "gen_ai.usage.completion_tokens", "value": {"intValue": "101"}},
        {"key": "gen_ai.latency.time_in_queue", "value": {"doubleValue": 0.25}},
        {"key": "gen_ai.latency.time_to_first_token", "value": {"doubleValue": 0.5}},
        {"key": "gen_ai.latency.e2e", "value": {"doubleValue": 3.5}},
        {"key": "gen_ai.latency.time_in_model_prefill", "value": {"doubleValue": 0.2}},
    ],
    "status": {},
}


def test_a_vllm_span_keeps_its_latencies_as_observed(tmp_path: Path):
    failed = json.loads(json.dumps(VLLM_SPAN))
    failed.update(
        spanId="eee19b7ec3c1b175",
        startTimeUnixNano="1765000001250000000",
        status={"code": 2, "message": "aborted"},
    )
    failed["attributes"] = [a for a in failed["attributes"] if "completion" not in a["key"]]
    path = tmp_path / "vllm.jsonl"
    path.write_text(json.dumps(_batch([VLLM_SPAN, failed])) + "\n")
    res = read_requests([str(path)])
    rows = res.frame.to_dicts()
    assert [r["input_tokens"] for r in rows] == [1234, 1234]
    assert [r["output_tokens"] for r in rows] == [101, 0]
    assert [r["ok"] for r in rows] == [True, False]
    assert [r["arrival_s"] for r in rows] == [0.0, 1.0]
    assert rows[0]["model"] == "meta-llama/Llama-3.1-8B"
    prof = build_profile([str(path)])
    assert prof.ok_share == 0.5
    lat = prof.observed.latency if prof.observed else {}
    assert lat["ttft"].p50_s == 0.5 and lat["queue"].p50_s == 0.25
    assert lat["e2e"].requests == 2 and lat["e2e"].p50_s == 3.5
    # TPOT = (e2e - ttft) / (output - 1) = 3.0 / 100, only where output > 1.
    assert lat["tpot"].requests == 1 and lat["tpot"].mean_s == pytest.approx(0.03)


def test_cli_profiles_traces_with_group_by_model(tmp_path: Path):
    spans, _ = made_spans(400, seed=5)
    path = write_lines(tmp_path / "t.jsonl", spans)
    out = tmp_path / "p.json"
    res = CliRunner().invoke(app, ["profile", str(path), "--group-by", "model", "-o", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert doc["source"]["format"] == "otlp" and set(doc["groups"]) == {"llama", "qwen"}
    assert doc["source"]["rows_skipped"] > 400  # the HTTP spans, counted


def test_traces_without_genai_spans_exit_2(tmp_path: Path):
    path = tmp_path / "http.jsonl"
    path.write_text(json.dumps(_batch([_span(1, 1, T0_NS, {"http.route": "/"})])) + "\n")
    res = CliRunner().invoke(app, ["profile", str(path), "-o", str(tmp_path / "p.json")])
    assert (
        res.exit_code == 2 and "no usable rows" in res.output and "not a GenAI span" in res.output
    )


def test_a_cut_first_line_is_skipped_and_the_rest_read(tmp_path: Path):
    spans, _ = made_spans(300, seed=9)
    path = write_lines(tmp_path / "t.jsonl", spans)
    lines = path.read_text().splitlines()
    path.write_text(lines[0][: len(lines[0]) // 2] + "\n" + "\n".join(lines[1:]) + "\n")
    assert detect_format(path) == "otlp"
    res = read_requests([str(path)])
    assert res.skip_reasons["not valid JSON"] == 1
    assert 0 < res.frame.height < 300


def _heap_peak_reading(path: Path) -> tuple[int, int]:
    """(rows read, the Python heap's peak while reading `path`, bytes; tracemalloc)."""
    import tracemalloc

    tracemalloc.start()
    try:
        result = read_requests([str(path)])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result.frame.height, peak


def test_a_file_exporters_output_streams_memory_does_not_grow_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Lines are read one at a time and the kept spans become columns every CHUNK_ROWS rows
    (300 here, so that a nested span and its parent fall in different chunks): reading 4x
    the spans costs about the same Python heap, and the requests and skips are still
    right. A reader that read the file whole, or kept a Python object per span, grows 4x."""
    from profiles.readers import otlp

    monkeypatch.setattr(otlp, "CHUNK_ROWS", 300)
    peaks = {}
    for n in (1500, 6000):
        spans, skipped = made_spans(n, seed=3)
        path = write_lines(tmp_path / f"traces-{n}.jsonl", spans, per_line=20)
        rows, peaks[n] = _heap_peak_reading(path)
        assert rows == n
    print(f"Python heap peak: {peaks[1500] / 2**20:.2f} MiB for 1500 requests, "
          f"{peaks[6000] / 2**20:.2f} MiB for 6000")  # fmt: skip
    assert peaks[6000] < 1.6 * peaks[1500], peaks
    prof = build_profile([str(path)])
    assert prof.requests == 6000
    assert prof.source.skip_reasons == {k: v for k, v in skipped.items() if v}
