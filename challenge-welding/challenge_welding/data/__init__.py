"""The evaluation data: the synthetic source dataset, the published-format reader and build-sets.

Owns the six evaluation sets (input data without labels, reference data, the training split)
and their calibration; it may import contract and scoring (build-sets ends by calibrating the
score's rescaling; tests/test_layers.py).
"""
