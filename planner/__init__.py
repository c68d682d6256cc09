"""capplan's planner: the CLI, SLO verdicts, limit search, capacity math, engine model, emulator."""

from contracts import __version__

__all__ = ["__version__"]
