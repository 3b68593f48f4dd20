"""Warm-start data from a model's own attempts: its solved episodes and hindsight-relabelled programs
(`arc-trl transcripts`, then `arc-trl sft --transcripts`)."""
