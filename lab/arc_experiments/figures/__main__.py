"""`python -m arc_experiments.figures`: the command of arc_experiments/figures (its docstring)."""

from arc_experiments.figures.catalog import main

if __name__ == "__main__":
    raise SystemExit(main())
