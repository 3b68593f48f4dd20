"""`python -m arc_experiments.learning`: the learning experiment's command (arc_experiments/learning/runner.py)."""

from arc_experiments.learning.runner import main

if __name__ == "__main__":
    main()
