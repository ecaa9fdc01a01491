"""Reported beyond the score: trust opinions and retention curves (stub until the report lands)."""


def compute_extras(frames, config) -> dict:
    return {}
