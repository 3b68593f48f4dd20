"""`arc-trl build-tiny-model` by path, for the learning experiment's stages (arc_experiments/learning/plan.py runs
`python scripts/build_tiny_model.py`); everything else runs `arc-trl build-tiny-model` or
`python -m arc_trl build-tiny-model`."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from arc_trl.cli.build_tiny_model import main  # noqa: E402

if __name__ == "__main__":
    main()
