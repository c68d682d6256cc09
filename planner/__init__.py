"""capplan's computation, one subpackage per job: engine, emulator, slo, loadtest, limit,
fleet, capacity, whatif, review, calibrate."""

from contracts import __version__

__all__ = ["__version__"]
