"""SLOs: the spec and its grammar (`spec`), verdicts over per-request records (`verdict`)."""
