"""`python -m planner.emulator ...` runs `capplan emulate ...` (for emulator subprocesses)."""

import sys

from planner.cli import app

if __name__ == "__main__":
    app(["emulate", *sys.argv[1:]], prog_name="capplan")
