"""Evaluation: replay and score completions (`score`), pass@k, voting, Kaggle submissions, tables and comparisons.

Modules are imported on demand (`from arc_trl.eval.score import score_completions`), so importing this package stays
light; `arc-trl evaluate` is the command line over them.
"""
