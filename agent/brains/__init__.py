"""Brains: anything with `next_turn(request) -> Turn`. anthropic, replay and autopilot."""
