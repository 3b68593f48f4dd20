"""Experiments built on arc_trl (not part of its API): the learning experiment (`arc_experiments.learning`) and the GPU
measurements. Each is run from a checkout, which holds the configs and docs they read and write."""
