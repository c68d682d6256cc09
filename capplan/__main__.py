"""`python -m capplan ...`: the same as the `capplan` console script."""

from capplan.cli import main

if __name__ == "__main__":
    main()
