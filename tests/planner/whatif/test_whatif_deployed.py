"""`capplan whatif` as deployed: precision and pipeline flags, a catalog file, a config.json
model, the steady-state default and what fixed levels skip; bad input exits 2 with the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from capplan.cli import app
from contracts.whatif import CLEAR_CHANGE
from planner.limit.measured.steady import SteadyRules
from planner.slo.spec import parse_slo
from planner.whatif.options import WhatifOptions
from testkit.profiles import make_profile

HF = Path(__file__).resolve().parents[2] / "fixtures" / "hf"


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("deployed") / "profile.json"
    path.write_text(make_profile([(256, 64), (1024, 128)]).to_json())
    return path


def _whatif(profile: Path, out: Path, *flags: str) -> tuple[int, str]:
    args = ["whatif", "--profile", str(profile), "--slo", "ttft:p95<=2s", "-o", str(out)]
    result = CliRunner().invoke(app, [*args, "--level-duration", "20", *flags])
    return result.exit_code, result.output


def test_the_default_judges_levels_under_the_steady_state_rules() -> None:
    options = WhatifOptions(profile_path="p.json", slo=parse_slo("ttft:p95<=2s"))
    assert options.rules() == SteadyRules()
    assert "steady-state rules" in options.search_text()
    fixed = WhatifOptions(profile_path="p.json", slo=parse_slo("ttft:p95<=2s"), level_s=60.0)
    assert fixed.rules() is None and "may be optimistic" in fixed.search_text()


def test_fixed_levels_say_what_they_skip_and_precision_is_recorded(
    profile: Path, tmp_path: Path
) -> None:
    out = tmp_path / "w.json"
    code, output = _whatif(
        profile, out, "--model", "llama-3.1-70b", "--gpu", "H200-141GB",
        "--quantization", "fp8", "--vary", "kv_cache_dtype",
    )  # fmt: skip
    assert code == 0, output
    assert "skip the steady-state rules" in " ".join(output.split())
    result = json.loads(out.read_text())
    assert (result["quantization"], result["level_s"]) == ("fp8", 20.0)
    auto, fp8 = result["candidates"]
    assert fp8["kv_capacity_tokens"] == pytest.approx(2 * auto["kv_capacity_tokens"], rel=0.01)


def test_nvfp4_on_an_h100_exits_2_naming_the_gpus_that_can(profile: Path, tmp_path: Path) -> None:
    code, output = _whatif(profile, tmp_path / "w.json", "--quantization", "nvfp4")
    assert code == 2
    assert "needs FP4 tensor cores: B200-180GB" in " ".join(output.split())


def test_a_model_that_fits_nowhere_exits_2_saying_how_short(profile: Path, tmp_path: Path) -> None:
    code, output = _whatif(profile, tmp_path / "w.json", "--model", "llama-3.1-70b")
    assert code == 2 and "GB short" in output and "Traceback" not in output
    assert "Value error" not in output  # pydantic's words stay out of the sentence


def test_a_tp_that_does_not_split_the_heads_exits_2(profile: Path, tmp_path: Path) -> None:
    """vLLM refuses tp 3 for Llama-3.1-8B (32 attention heads, 8 KV heads); tp 16 on its 8 KV
    heads replicates them (16 is a multiple of 8) and goes as far as the memory check."""
    code, output = _whatif(profile, tmp_path / "w.json", "--tp", "3")
    flat = " ".join(output.split())
    assert code == 2 and "Traceback" not in output
    assert "tp=3 does not split llama-3.1-8b's 32 attention heads and 8 KV heads evenly" in flat
    for tp in ("2", "8", "16"):
        code, output = _whatif(profile, tmp_path / "w.json", "--tp", tp, "--peak-rps", "1")
        assert "does not split" not in output, (tp, output)


def test_requests_longer_than_max_model_len_are_named(profile: Path, tmp_path: Path) -> None:
    """The profile holds (256, 64) and (1024, 128) requests: under --max-model-len 1024 the
    second kind (1,152 tokens) is too long for a server; whatif says what share, and a
    length beyond the model's context exits 2 (a bug hunt found both silent)."""
    out = tmp_path / "w.json"
    code, output = _whatif(profile, out, "--max-model-len", "1024", "--peak-rps", "1")
    assert code == 0, output
    flat = " ".join(output.split())
    share = next(a for a in json.loads(out.read_text())["assumptions"] if "too long" in a)
    assert share.startswith("too long: 50.0% of the profile's requests") and share[:60] in flat
    assert "longer than max_model_len 1,024 (--max-model-len)" in share
    code, output = _whatif(profile, out, "--peak-rps", "1")
    assert code == 0 and "too long" not in output
    code, output = _whatif(profile, out, "--max-model-len", "10000000")
    assert code == 2 and "exceeds llama-3.1-8b's context of 131,072 tokens" in output


def test_a_flag_the_vary_list_leaves_out_exits_2(profile: Path, tmp_path: Path) -> None:
    """--quantization fp8 with --vary quantization=none:awq ran none and awq only, and the
    file still said fp8 (a bug hunt); the same for --engine. Both now exit 2; a value the
    list holds runs."""
    out = tmp_path / "w.json"
    for flags, said in (
        (["--quantization", "fp8", "--vary", "quantization=none:awq"], "--quantization fp8 is"),
        (["--engine", "trtllm", "--vary", "engine=vllm:sglang"], "--engine trtllm is not among"),
    ):
        code, output = _whatif(profile, out, *flags)
        assert code == 2 and said in " ".join(output.split()), output
    code, output = _whatif(
        profile, out, "--quantization", "fp8", "--vary", "quantization=none:fp8", "--peak-rps", "1"
    )
    assert code == 0, output


def test_a_candidate_s_limit_does_not_depend_on_the_order_of_the_values(
    profile: Path, tmp_path: Path
) -> None:
    """A candidate's search starts at the limit of the first one of its shape; "first" was
    the order typed, so `--engine vllm,trtllm` and `trtllm,vllm` gave vLLM 18.82 and 19.33
    req/s on one profile (a bug hunt). First is now the sorted order of the settings."""
    limits = []
    for engines in ("vllm,trtllm", "trtllm,vllm"):
        out = tmp_path / f"{engines}.json"
        code, output = _whatif(profile, out, "--engine", engines, "--peak-rps", "1")
        assert code == 0, output
        limits.append(
            {c["label"]: c["limit_rps"] for c in json.loads(out.read_text())["candidates"]}
        )
    assert limits[0] == limits[1] and len(limits[0]) == 2


def test_a_candidate_s_limit_does_not_depend_on_the_others_in_the_grid(
    profile: Path, tmp_path: Path
) -> None:
    """A candidate's search started at the limit of the first candidate of its shape, so its
    limit changed with its companions (a bug hunt: a 1p3d unit gave 0.618 req/s beside 1p1d
    and 0.94 beside off, with fixed levels where pass and fail are not monotone in the rate).
    Each search now starts from its own engine: vLLM's limit is the same alone and beside
    any other engine."""
    limits = set()
    for engines in ("vllm", "trtllm,vllm", "sglang,vllm"):
        out = tmp_path / f"{engines}.json"
        code, output = _whatif(profile, out, "--engine", engines, "--peak-rps", "1")
        assert code == 0, output
        candidates = json.loads(out.read_text())["candidates"]
        (vllm,) = [c for c in candidates if c["settings"].get("engine", "vllm") == "vllm"]
        limits.add(vllm["limit_rps"])
    assert len(limits) == 1 and None not in limits, limits


def test_a_prediction_above_its_interval_says_so(profile: Path, tmp_path: Path) -> None:
    """SGLang's published limit rows all held less than the model (p90 of the ratio below
    1), so its interval lies below the prediction: the line says so (a bug hunt read 28.5
    req/s with an interval of 9.6-23.9 and no word). vLLM's interval spans its prediction."""
    out = tmp_path / "w.json"
    for engine, above in (("sglang", True), ("vllm", False)):
        code, output = _whatif(profile, out, "--engine", engine, "--peak-rps", "1")
        (c,) = json.loads(out.read_text())["candidates"]
        assert code == 0 and (c["limit_rps"] > c["limit_high_rps"]) == above, output
        assert ("above its interval" in " ".join(output.split())) == above, output


def test_a_knob_without_effect_is_not_called_harmful(profile: Path, tmp_path: Path) -> None:
    """Prefix caching on a profile with no shared prefixes cannot change the limit; the two
    searches still differ by their noise (a bug hunt read "prefix_caching on vs off: -5%
    limit (hurts)"; at another tolerance the sign flipped to +13 %). A change within
    CLEAR_CHANGE is called noise, in the console and in whatif.json's sentence."""
    out = tmp_path / "w.json"
    code, output = _whatif(profile, out, "--vary", "prefix_caching", "--peak-rps", "1")
    assert code == 0, output
    (lesson,) = [x for x in json.loads(out.read_text())["lessons"] if x["knob"] == "prefix_caching"]
    assert abs(lesson["limit_change"]) < CLEAR_CHANGE, lesson
    assert "within two searches' noise" in lesson["sentence"]
    assert "(hurts)" not in lesson["sentence"] and "-0%" not in lesson["sentence"]


def test_pipeline_stages_count_their_gpus(profile: Path, tmp_path: Path) -> None:
    out = tmp_path / "w.json"
    code, output = _whatif(
        profile, out, "--model", "llama-3.1-70b", "--gpu", "H100-80GB", "--tp", "2",
        "--pp", "2", "--peak-rps", "1",
    )  # fmt: skip
    assert code == 0, output
    (c,) = json.loads(out.read_text())["candidates"]
    assert (c["label"], c["pp"]) == ("H100-80GB tp2 pp2", 2)
    assert c["gpus"] == 4 * c["instances"]


def test_a_config_json_and_a_catalog_file_name_a_model(profile: Path, tmp_path: Path) -> None:
    out = tmp_path / "w.json"
    code, output = _whatif(profile, out, "--model", str(HF / "Llama-3.1-8B" / "config.json"))
    assert code == 0, output
    bad = tmp_path / "cat.yaml"
    bad.write_text(
        "gpus:\n  mine:\n    memory_bytes: 80e9\n    hbm_bandwidth_bytes_per_s: lots\n"
        "    bf16_flops: 900e12\n"
    )
    code, output = _whatif(profile, out, "--catalog", str(bad), "--gpu", "mine")
    assert code == 2
    assert "gpus.mine.hbm_bandwidth_bytes_per_s: expected a number" in " ".join(output.split())


def test_a_gpu_and_model_as_their_vendors_name_them(profile: Path, tmp_path: Path) -> None:
    """nvidia-smi's GPU name and a hub model id with its tags: one candidate per GPU, under
    the catalog's name (the same GPU twice is one candidate), priced from the table."""
    out = tmp_path / "w.json"
    code, output = _whatif(
        profile, out, "--gpu", "NVIDIA H100 80GB HBM3,h100",
        "--model", "meta-llama/Meta-Llama-3.1-8B-Instruct-FP8", "--quantization", "fp8",
    )  # fmt: skip
    assert code == 0, output
    (candidate,) = json.loads(out.read_text())["candidates"]
    assert candidate["gpu"] == "H100-80GB" and candidate["label"].startswith("H100-80GB")
    assert candidate["monthly_cost_usd"] > 0


def test_a_board_with_no_price_on_file_still_gets_its_limit(profile: Path, tmp_path: Path) -> None:
    """An H100 NVL has no public price on file: whatif still answers its limit and instance
    count, says the cost waits for --gpu-hour-price, and ranks it only once priced. Fails if
    a missing price stops the candidate (exit 2, as it did)."""
    out = tmp_path / "w.json"
    code, output = _whatif(profile, out, "--gpu", "NVIDIA H100 NVL")
    assert code == 0, output
    (c,) = json.loads(out.read_text())["candidates"]
    assert c["gpu"] == "H100-NVL-94GB" and c["limit_rps"] > 0 and c["instances"] >= 1
    assert c["monthly_cost_usd"] is None and c["rank"] is None
    assert "--gpu-hour-price" in c["cost_note"] and "no price" in output
    # output tokens/s at the limit, as serving benchmarks publish it: the profile's two
    # pairs answer 64 and 128 tokens, 96 on average
    assert c["output_tokens_per_s"] == pytest.approx(96 * c["limit_rps"], rel=0.2)
    code, output = _whatif(profile, out, "--gpu", "NVIDIA H100 NVL", "--gpu-hour-price", "3")
    assert code == 0, output
    (c,) = json.loads(out.read_text())["candidates"]
    assert c["monthly_cost_usd"] > 0 and c["rank"] == 1 and c["cost_note"] is None
