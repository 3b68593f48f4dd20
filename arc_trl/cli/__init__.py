"""The `arc-trl` command: one subcommand per task (`arc-trl --help` lists them); `arc_trl/cli/main.py` dispatches.

The modules here are the bodies of the `scripts/*.py` shims, so a checkout and an installed package run the same code.
"""
