"""The plan as operations watch it: Prometheus alert rules and a Grafana dashboard whose
lines come from the plan and its limit run (write.py: `write_ops`, `review_with_ops`)."""
