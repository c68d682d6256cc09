"""Engine settings the engine-model tests share."""

from __future__ import annotations

# The scheduler's own behaviour, without the front-end queue in front of it
# (tests/planner/engine/test_engine_profiles.py covers the front end).
NO_FRONT_END = {
    "frontend_s": 0.0,
    "frontend_s_per_prompt_token": 0.0,
    "frontend_s_per_request": 0.0,
}
