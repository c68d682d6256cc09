"""The words of the report's "Which configuration" section (reports.pages.which), en and zh."""

WHICH_EN: dict[str, str] = {}

WHICH_ZH: dict[str, str] = {}
