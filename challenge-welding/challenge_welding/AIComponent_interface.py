"""Older import path of the starter kit: the same class as ai_component_interface."""

from challenge_welding.ai_component_interface import AbstractAIComponent

__all__ = ["AbstractAIComponent"]
