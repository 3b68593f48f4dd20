"""Procedural ARC-style tasks with reference programs (in the spirit of re-arc / BARC synthetic data).

    tasks = generate_curriculum(100, seed=0, difficulty="tiny")
    tasks[0].metadata  # family, params, reference_program, difficulty, rule
    program_completion(tasks[0]); repl_turns(tasks[0])  # SFT transcripts
    save_synthetic(tasks, "data/synthetic"); load_synthetic("data/synthetic")

See docs/synthetic.md for the families and difficulty levels.
"""

from arc_trl.synthetic.difficulty import DIFFICULTIES, Difficulty, get_difficulty
from arc_trl.synthetic.family import FAMILIES, Family, family_names, get_family
from arc_trl.synthetic.generate import generate_curriculum, generate_task, reference_transform
from arc_trl.synthetic.io import load_synthetic, metadata_record, read_metadata, save_synthetic
from arc_trl.synthetic.transcripts import program_completion, repl_turns

__all__ = [
    "DIFFICULTIES",
    "FAMILIES",
    "Difficulty",
    "Family",
    "family_names",
    "generate_curriculum",
    "generate_task",
    "get_difficulty",
    "get_family",
    "load_synthetic",
    "metadata_record",
    "program_completion",
    "read_metadata",
    "reference_transform",
    "repl_turns",
    "save_synthetic",
]
