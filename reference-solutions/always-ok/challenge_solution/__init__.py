"""A naive reference component of the welding challenge."""
