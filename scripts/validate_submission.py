#!/usr/bin/env python
"""Check a Kaggle ARC submission against a challenges file; with solutions, also print its score.

    python scripts/validate_submission.py --submission submission.json --challenges arc-agi_evaluation_challenges.json \
        [--solutions arc-agi_evaluation_solutions.json]

Prints every problem (missing/extra tasks, wrong number of test entries, missing attempt keys, invalid grids), each
naming the task id and test index. Exit code: 0 valid, 1 invalid, 2 unreadable input. Solutions default to
`X_solutions.json` beside `X_challenges.json`; `--challenges` may also be a dataset name such as `arc-agi-2/eval`.
"""

import sys
from pathlib import Path

try:
    from arc_trl.eval.submission import validate_main
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from arc_trl.eval.submission import validate_main

if __name__ == "__main__":
    sys.exit(validate_main())
