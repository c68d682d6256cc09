"""Known inputs and test servers shared by the bench scripts and the tests.

bench/ never imports tests/; tests import from here. Nothing in the product (contracts,
profiles, locustfiles, planner, reports) imports this package, and it is not installed.
"""
