"""Autoscaling: policies by name, a request-level and a per-step fleet simulation, manifests.

`study_autoscaling` (run.py) is the study `capplan plan --autoscale` runs; `simulate` (des.py)
is the request-level truth; `write_manifests` (manifests.py) writes the KEDA and HPA objects.
"""
