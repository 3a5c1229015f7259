"""Where trials run when there is more than one box: a trial (start a server with the engine
profile, wait for it, benchmark it from the same node, kill it and everything it spawned) as a
unit of work, and the backends that place trials on a fleet (Ray). docs/fleet.md."""
