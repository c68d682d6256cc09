"""Running Locust: the load test and its stage summaries, its processes, remote workers, `--workers
auto`, the preflight, free ports."""
