"""Synthetic, verified training data: problems built from the API catalog with their
Triton and CUDA kernels (``templates.py``), checked by the evaluator and module validation
before they are kept (``generate.py``), for supervised warm starts (``kz data synth``)."""
