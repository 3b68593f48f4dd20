"""`arc-trl evaluate` by path, for the learning experiment's stages (arc_experiments/learning/plan.py runs
`python scripts/evaluate.py`); everything else runs `arc-trl evaluate` or `python -m arc_trl evaluate`."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from arc_trl.cli.evaluate import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
