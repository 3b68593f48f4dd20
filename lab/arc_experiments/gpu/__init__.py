"""The GPU runs: stages of the learning experiment and measurements (`python -m arc_experiments.gpu --list`). Each
stage is a function of a `Context` that runs the project's own commands; how a machine is reached stays outside."""
