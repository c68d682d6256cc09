"""The load generator's names for the run directory's record and metric tables.

The files themselves (part writers, readers, consolidation) are owned by contracts.rundir;
this module keeps the names the load generator's modules import, so they need not know where
the run directory's code lives.
"""

from __future__ import annotations

from contracts.rundir import (
    METRIC_NAMES,
    METRICS_PARTS,
    RECORD_NAMES,
    RECORDS_PARTS,
    PartWriter,
)

__all__ = ["METRIC_NAMES", "METRICS_PARTS", "RECORD_NAMES", "RECORDS_PARTS", "PartWriter"]
