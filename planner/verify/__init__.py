"""`capplan verify`: the plan's fleet measured at its design peak behind a real load balancer."""

from planner.verify.options import VerifyOptions
from planner.verify.run import run_verify

__all__ = ["VerifyOptions", "run_verify"]
