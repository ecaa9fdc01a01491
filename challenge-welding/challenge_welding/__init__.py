"""Trustworthy-AI welding challenge: interface, data, ingestion, scoring."""

__version__ = "1.1.0"
