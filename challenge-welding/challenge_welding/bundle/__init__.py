"""The Codabench competition bundle: build it (bundle.py) and check it (validate.py)."""
