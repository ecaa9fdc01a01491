"""The evaluation data: the synthetic source dataset, the published-format reader and build-sets.

Owns the six evaluation sets (input data without labels, reference data, the training split)
and their calibration; it may import contract and scoring (build-sets ends by calibrating the
score's rescaling; tests/test_layers.py).
Modules: synth.py (synthetic welds) drawn by render.py, source.py (datasets in the published
format, read as published), build_sets.py (the six sets) with perturbations.py (the
robustness ladders), parquet_io.py (parquet the kit's pinned pyarrow reads), parallel.py (a
process pool, results in input order), contact_sheet.py (one weld per seam and perturbation).
"""
