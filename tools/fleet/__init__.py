"""Where trials run when there is more than one box: a trial (start a server with the engine
profile, wait for it, benchmark it from the same node, kill it and everything it spawned) as a
unit of work (trial.py), the lab's cluster of simulated boxes (lab_cluster.py), and the backend
that places trials on a fleet (ray_backend.py). docs/fleet.md, "Where the fleet lives".

Below the tool protocol: tools/base.py names these types for ToolContext.fleet, so nothing here
imports tools/base.py or a tool (pyproject.toml's contract; tests/test_layers_fleet.py). The
run_trial tool is tools/run_trial.py, the agent's side agent/fleet/."""


class FleetError(Exception):
    """The fleet cannot be reached or used; one line."""
