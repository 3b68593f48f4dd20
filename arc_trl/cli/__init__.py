"""The `arc-trl` command: one subcommand per task (`arc-trl --help` lists them); `arc_trl/cli/main.py` dispatches.

Every command lives here (or in the module `main.py` names). Code that starts one as a process runs
`python -m arc_trl SUBCOMMAND`; `scripts/` keeps a shim only where a path is needed (`accelerate launch
scripts/train.py`).
"""
