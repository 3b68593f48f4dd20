"""`arc-trl experiment` from a checkout: the learning experiment, in `arc_experiments/learning/runner.py`."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from arc_experiments.learning.runner import main  # noqa: E402

if __name__ == "__main__":
    main()
