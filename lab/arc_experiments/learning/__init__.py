"""The learning experiment: SFT a student, build teachers, RL it (GRPO + OPD, GRPO alone), evaluate on held-out tasks,
report with seed-aware intervals.

    python -m arc_experiments.learning --configs configs/demo          # the CPU demo

Modules: `runner` (the command), `report` (summary, intervals, merging machines' results), `heldout_check`,
`sweep_choice`, `compare_arms`.
"""
