"""Markers shared by the whole suite."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "serial: changes the evaluator's own files; `make test` runs these alone, "
        "before the parallel run (an ingestion running beside it would see the change)")
