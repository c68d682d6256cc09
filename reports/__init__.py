"""Rendering only: charts and the PDF capacity baseline from finished results (en, zh)."""
