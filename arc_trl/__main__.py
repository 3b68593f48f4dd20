"""`python -m arc_trl SUBCOMMAND [args]` = `arc-trl SUBCOMMAND [args]`: how code starts the project's commands as
processes (`sys.executable -m arc_trl ...`, with no need for the console script on PATH)."""

import sys

from arc_trl.cli.main import main

if __name__ == "__main__":  # the guard matters: vLLM's spawned workers re-import the main module
    sys.exit(main())
