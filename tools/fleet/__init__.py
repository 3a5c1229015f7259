"""Where trials run when there is more than one box: a trial (start a server with the engine
profile, wait for it, benchmark it from the same node, kill it and everything it spawned) as a
unit of work (trial.py), the lab's cluster of simulated boxes (lab_cluster.py), and the backend
that places trials on a fleet (ray_backend.py). docs/fleet.md."""


class FleetError(Exception):
    """The fleet cannot be reached or used; one line."""
