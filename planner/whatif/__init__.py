"""Which configuration: what-if options and run, its lessons, disaggregation, the limit search in
virtual time per candidate, and compare."""
