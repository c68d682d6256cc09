"""The fleet in virtual time: traffic synthesis, simulation and verdicts, the plan's fleet check,
calibration of the engine model to a limit."""
