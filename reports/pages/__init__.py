"""The pages of the capacity baseline, one module each, in the order the PDF shows them.

Each page is a function of a `ReportContext` (reports.pages.context) returning flowables; the
layout toolkit they are set with is reports.layout.
"""
