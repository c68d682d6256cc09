"""The plan as operations watch it: Prometheus alert rules and a Grafana dashboard whose
lines come from the plan and its limit run (`write_ops`)."""

from planner.ops.write import write_ops

__all__ = ["write_ops"]
