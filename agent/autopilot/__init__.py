"""The autopilot: a deterministic campaign brain (planner + brain wrapper)."""
