"""Preset profiles: real profiles of the same schema, adjusted by the user's figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contracts.errors import ConfigError, InputError
from profiles.model import Profile, load_profile, save_profile
from profiles.presets import PRESETS, preset_profile


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_each_preset_is_a_full_profile(name: str, tmp_path: Path) -> None:
    p = preset_profile(name)
    assert p.source.format == "preset" and p.source.preset == name
    assert p.source.derivation and len(p.source.derivation) > 40
    assert p.arrivals.mean_rate_rps > 0
    assert len(p.arrivals.window_rate_percentiles["60s"]) == 101
    assert len(p.lengths.sampler.pairs) > 100
    save_profile(p, tmp_path / "p.json")
    assert load_profile(tmp_path / "p.json") == p


def test_preset_shapes_come_from_their_traces() -> None:
    chat, rag = preset_profile("chat"), preset_profile("rag")
    assert chat.lengths.input.mean == pytest.approx(1154.7, abs=0.05)
    assert "Azure" in (chat.source.derivation or "")
    assert rag.prefix.ideal_hit_ratio == pytest.approx(0.65, abs=0.01)
    assert "Mooncake" in (rag.source.derivation or "")
    agent, batch = preset_profile("agent"), preset_profile("batch")
    assert agent.sessions.available and agent.sessions.turns is not None
    assert agent.sessions.turns.mean > 3
    assert batch.lengths.output.mean > 3 * chat.lengths.output.mean
    assert batch.arrivals.interarrival_cv is not None and batch.arrivals.interarrival_cv < 0.5


def test_adjustments() -> None:
    base = preset_profile("chat")
    p = preset_profile(
        "chat",
        rate_rps=40,
        peak_to_mean=2.5,
        input_mean=3000,
        output_mean=100,
        shared_prefix_tokens=1024,
        shared_prefix_share=0.5,
        seed=3,
    )
    a = p.arrivals
    assert a.mean_rate_rps == pytest.approx(40)
    assert a.peak_to_mean["60s"] == pytest.approx(2.5)
    assert a.peak_rate_rps["60s"] == pytest.approx(100)
    assert a.window_rate_percentiles["60s"][100] == pytest.approx(100)
    assert p.lengths.input.mean == pytest.approx(3000)
    assert p.lengths.output.mean == pytest.approx(100)
    assert p.lengths.input.p50 == pytest.approx(
        base.lengths.input.p50 * 3000 / base.lengths.input.mean
    )
    assert p.prefix.available and p.prefix.ideal_hit_ratio == pytest.approx(0.5 * 1024 / 3000)
    assert p.prefix.top_prefixes[0].prefix_tokens == 1024
    assert p.lengths.sampler.seed == 3
    assert sorted(p.lengths.sampler.pairs) != sorted(base.lengths.sampler.pairs)
    assert "Adjusted" in (p.source.derivation or "")
    assert p.source.digest != base.source.digest
    Profile.model_validate(json.loads(p.to_json()))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rate_rps": 0},
        {"peak_to_mean": 0.5},
        {"input_mean": -1},
        {"shared_prefix_tokens": 100},
        {"shared_prefix_tokens": 100, "shared_prefix_share": 1.5},
    ],
)
def test_bad_figures_are_config_errors(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        preset_profile("chat", **kwargs)


def test_unknown_preset_lists_known_ones() -> None:
    with pytest.raises(InputError, match="known presets: chat, rag, agent, batch"):
        preset_profile("video")
