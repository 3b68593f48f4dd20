"""`arc-trl build-tiny-model` from a checkout: the code lives in `arc_trl/cli/build_tiny_model.py`."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from arc_trl.cli.build_tiny_model import main  # noqa: E402

if __name__ == "__main__":
    main()
