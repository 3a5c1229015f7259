"""A campaign across a fleet, the agent's side (docs/fleet.md, "Where the fleet lives"):

- run.py: `agent run --fleet` and `agent resume` of a fleet run - the config checked, the
  cluster connected, the brain's driver chosen;
- model.py: a model (Claude) drives the fleet through the run_trial tool;
- controller.py: the autopilot's controller - plans in batches, places trials, collects them;
- resume.py: what an earlier controller left - the log replayed, its servers killed.

Each imports only those below it (pyproject.toml's agent/fleet/ contract). Where trials run is
tools/fleet/; the run_trial tool tools/run_trial.py; the fleet's view agent/view/fleet.py."""
