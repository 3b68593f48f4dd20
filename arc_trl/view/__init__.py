"""`arc-trl view`: evaluation folders and rollout dumps as a self-contained HTML report (`report.py`), grids drawn in
the ARC palette (`grids.py`, also W&B's images), read from disk by `records.py`."""

from arc_trl.view.records import Source, ViewInputError, load_source
from arc_trl.view.report import render_report, write_report

__all__ = ["Source", "ViewInputError", "load_source", "render_report", "write_report"]
