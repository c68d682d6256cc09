"""The calibration's fitting recovers the factors of a known engine from its own probes.

The probes are simulated by the engine model (tests/planner/calibrate/calibrate_synthetic.py), so
the fit is tested against the product's behaviour, not against its own formulas. The controls
check that the assertions can fail: data from another engine do not pass for this one.
"""

from __future__ import annotations

import pytest

from contracts.calibration import KvCapacity
from contracts.errors import RunError
from planner.calibrate import CalibrateOptions, fit_measured
from planner.calibrate.fit import DecodePoint, PrefillPoint, fit_decode, fit_prefill
from planner.calibrate.measure import probe_plan
from planner.engine import EngineConfig, build_engine_config
from tests.planner.calibrate.calibrate_synthetic import synthetic

TRUTH = dict(mfu=0.35, mbu=0.6, step_overhead_s=2e-3, seq_overhead_s=1e-4, frontend_s=8e-3)
OTHER = dict(mfu=0.7, mbu=0.6, step_overhead_s=6e-3, seq_overhead_s=3e-4, frontend_s=2e-3)
OPTIONS = CalibrateOptions(
    host="synthetic", served_model="m", gpu="H100", catalog_model="llama-3.1-8b"
)
SPECS = probe_plan(max_context=8192, slots=8)


def _config(**factors: float) -> EngineConfig:
    return build_engine_config("H100-80GB", "llama-3.1-8b", engine="vllm", **factors)


def _fit(truth: EngineConfig, noise: float = 0.0, trend: float = 0.0):  # type: ignore[no-untyped-def]
    measured = synthetic(SPECS, truth, noise=noise, trend=trend)
    return fit_measured(OPTIONS, _config(), measured, KvCapacity(source="none"), {}, 1.0)


def _recovered(cal, truth: dict[str, float], within: float) -> list[str]:  # type: ignore[no-untyped-def]
    """The factors of `truth` that the calibration missed by more than `within`."""
    return [
        f"{k}: {cal.factors[k].value:.4g} vs {v:.4g}"
        for k, v in truth.items()
        if abs(float(cal.factors[k].value) / v - 1) > within
    ]


def test_noise_free_probes_give_back_the_engine_they_came_from() -> None:
    cal = _fit(_config(**TRUTH))
    assert _recovered(cal, TRUTH, within=0.05) == []
    assert cal.held_out.worst_abs_error < 0.01
    assert {p.name for p in cal.probes if p.held_out} == set(cal.held_out.probes)


def test_control_another_engines_probes_do_not_give_these_factors() -> None:
    cal = _fit(_config(**OTHER))
    missed = _recovered(cal, TRUTH, within=0.05)
    assert len(missed) >= 3, missed


def test_noisy_probes_still_predict_the_held_out_ones() -> None:
    cal = _fit(_config(**TRUTH), noise=0.01)
    assert cal.held_out.median_abs_error < 0.03
    assert cal.drift.median_spread < 0.02


def test_control_a_model_fitted_on_one_engine_misses_another() -> None:
    fitted = _fit(_config(**TRUTH))
    other = synthetic(SPECS, _config(**OTHER))
    by_name = {p.name: p.predicted_s for p in fitted.probes}
    errors = [
        abs(by_name[m.spec.name] / m.values_s[0] - 1)  # type: ignore[operator]
        for m in other
        if by_name[m.spec.name] is not None
    ]
    assert max(errors) > 0.2


def test_prefill_and_decode_are_fitted_apart() -> None:
    truth = _config(**TRUTH)
    pre = synthetic([s for s in SPECS if s.kind in ("prefill", "frontend")], truth)
    points = [PrefillPoint(prompt_tokens=m.spec.prompt_tokens, ttft_s=m.values_s[0]) for m in pre]
    p = fit_prefill(_config(), points)
    assert p.mfu == pytest.approx(0.35, rel=0.03)
    dec = synthetic([s for s in SPECS if s.kind == "decode"], truth)
    d = fit_decode(
        _config(mfu=p.mfu, mbu=p.mbu),
        [
            DecodePoint(batch=m.spec.batch, context_tokens=m.context_tokens, step_s=m.values_s[0])
            for m in dec
        ],
    )
    # Without the one-token anchor the decode's fixed costs are one sum: mbu's share is open,
    # the step time is not.
    assert d.rms_rel_error < 0.01
    assert d.seq_overhead_s == pytest.approx(1e-4, rel=0.1)


def test_the_fit_needs_two_prompt_lengths_and_two_batch_sizes() -> None:
    with pytest.raises(ValueError, match="two prompt lengths"):
        fit_prefill(_config(), [PrefillPoint(prompt_tokens=64, ttft_s=0.1)] * 3)
    with pytest.raises(ValueError, match="two batch sizes"):
        fit_decode(_config(), [DecodePoint(batch=1, context_tokens=10, step_s=0.01)] * 3)


def test_a_drifting_server_is_refused() -> None:
    with pytest.raises(RunError, match="calibration refused") as err:
        _fit(_config(**TRUTH), noise=0.01, trend=0.6)
    assert "bound 25%" in str(err.value)


def test_control_a_steady_server_with_the_same_noise_is_accepted() -> None:
    cal = _fit(_config(**TRUTH), noise=0.01, trend=0.0)
    assert abs(cal.drift.trend) < 0.05


def test_decode_attention_gets_its_own_cost_per_pair() -> None:
    """A server whose single-query attention costs 2 us a (query, key) pair on top of the
    roofline (as a CPU's does): the fit gives the cost back and predicts the held-out
    decode at the long context; the same factors with decode attention priced as prefill's
    (the factor dropped, the control) miss that probe by more than 10 %."""
    truth = {**TRUTH, "decode_attention_s_per_pair": 2e-6}
    cal = _fit(_config(**truth))
    assert _recovered(cal, truth, within=0.05) == []
    assert cal.held_out.worst_abs_error < 0.02
    held = next(m for m in synthetic(SPECS, _config(**truth)) if m.spec.name == "decode:b2:c512")
    factors = {k: f.value for k, f in cal.factors.items() if k != "decode_attention_s_per_pair"}
    from planner.calibrate.fit import decode_step_s

    without = decode_step_s(_config(**factors), 2, held.context_tokens)
    assert abs(without / held.values_s[0] - 1) > 0.10


def test_a_fit_at_its_bound_with_large_held_out_errors_says_so() -> None:
    """Long prompts 3x faster than the engine (a prefix cache answering them) pin mfu at 1."""
    truth = _config()
    assert _fit(truth).warnings == []
    measured = synthetic(SPECS, truth)
    for m in measured:
        if m.spec.kind == "prefill" and m.spec.prompt_tokens >= 1000:
            m.values_s[:] = [v / 3 for v in m.values_s]
    cal = fit_measured(OPTIONS, truth, measured, KvCapacity(source="none"), {}, 1.0)
    assert any(w.startswith("factors at their bounds: mfu 1 ") for w in cal.warnings)
    assert any(w.startswith("held-out error median") for w in cal.warnings)
