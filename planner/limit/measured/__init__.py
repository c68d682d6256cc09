"""The measured limit search (`capplan limit --method measured`, and the measured levels that
hold the fast search's answer): bracket by growth until a level fails, narrow on measured
levels until the pass/fail gap is within the tolerance (search.py, pure), through a probe
(live.py: Locust; planner.limit.probe: the protocol), with its steady-state rules
(steady.py), its knobs (config.py), limit.json's records (result.py) and its I/O edge
(edge.py)."""
