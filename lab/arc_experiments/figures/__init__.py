"""The headline figures, each written by code from files committed under `results/` (results/README.md):

    python -m arc_experiments.figures            # rewrite every summary below from its inputs
    python -m arc_experiments.figures --check    # recompute them and compare with the committed files (exit 1)

- results/gpu_learning_summary.json: the 0.6B experiment's machines, results/gpu_learning/results-machine*.json;
- results/gpu_learning_smollm2_summary.json: results/gpu_learning_smollm2/ (teachers, sweeps, arms, ARC-AGI-1, the
  held-out check; smollm2.py says which figures its files cannot give);
- results/gpu_step_summary.json: results/gpu_profiles/speed_*.json, results/gpu_step_speed/summary_inputs.json.

Modules: `catalog` (each summary: its file, inputs and builder), `smollm2` (the SmolLM2 summary: what its committed
files can give, and which figures they cannot), `steps` (the step summary through benchmarks/step_summary.py).
Experiments run from a checkout: the paths are relative to it.
"""
