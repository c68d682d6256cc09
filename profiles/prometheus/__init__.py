"""Profiles from a serving fleet's Prometheus metrics: engines' metric names, the HTTP reader,
the statistics metrics allow, and the builder (`profiles.prometheus.build`)."""
