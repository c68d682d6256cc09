"""The test kit: what tests and benchmarks share — slot and stream servers with known
timing, queueing truths, fixtures, PDF page checks, the S3 server, report inputs.

The layer between the product and its checks: it imports the product, never tests/ or
bench/; tests/ and bench/ import it (tests never import bench/). Not installed: tests and
benchmarks run from the repository root.
"""
