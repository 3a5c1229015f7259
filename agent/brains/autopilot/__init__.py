"""The autopilot: a deterministic campaign brain. planner.py decides (a pure function of what was
measured), brain.py turns each decision into the tool calls a model would make."""

from agent.brains.autopilot.brain import AutopilotBrain

__all__ = ["AutopilotBrain"]
