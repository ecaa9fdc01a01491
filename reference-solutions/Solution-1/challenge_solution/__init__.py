"""Solution-1 of the welding challenge (see AIComponent.py)."""
