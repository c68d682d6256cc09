"""capplan's planner: the CLI, SLO verdicts, limit search, capacity math, engine model, emulator."""

__version__ = "0.1.0"
