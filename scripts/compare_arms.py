"""`arc-trl compare-arms` from a checkout: the code lives in `arc_experiments/learning/compare_arms.py`."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from arc_experiments.learning.compare_arms import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
