"""capplan's contracts: the error tree, JSON I/O and the typed schemas of run, limit, plan and
whatif files. Every other package imports this one; it imports nothing of the project."""

__version__ = "0.1.0"
