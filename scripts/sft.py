"""`arc-trl sft` by path, for the learning experiment's stages (arc_experiments/learning/plan.py runs
`python scripts/sft.py`); everything else runs `arc-trl sft` or `python -m arc_trl sft`."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from arc_trl.cli.sft import main  # noqa: E402

if __name__ == "__main__":
    main()
