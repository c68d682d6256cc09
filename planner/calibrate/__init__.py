"""`capplan calibrate`: a live server characterised in minutes and the engine model fitted to it.

Probes (`measure`, over `probes`' HTTP) time prefills, decode steps, the front end and the
prefix cache, interleaved in rounds; `fit` fits prefill and decode factors apart; `session`
checks drift and the held-out probes and builds cal.json (contracts.calibration).
"""

from planner.calibrate.probes import Target
from planner.calibrate.session import (
    CalibrateOptions,
    calibrated_config,
    calibration_overrides,
    fit_measured,
    run_calibration,
)

__all__ = [
    "CalibrateOptions",
    "Target",
    "calibrated_config",
    "calibration_overrides",
    "fit_measured",
    "run_calibration",
]
