"""What the autopilot can know about an engine without launching it: for the simulator, its own
argument parser says which command lines it would refuse; for vLLM and SGLang a refusal is
learned the hard way (a failed start, never retried)."""

from __future__ import annotations

import shlex

from tools.domain.config import Config
from tools.domain.space import Check, Flags, SearchSpace


def sim_base_argv(command: str | None) -> list[str]:
    """The simulator's own flags in a server command (`python -m sim ...` or `agent sim serve`)."""
    from sim.space import DEFAULT_BASE_FLAGS

    if not command:
        return list(DEFAULT_BASE_FLAGS)
    try:
        argv = shlex.split(command)
    except ValueError:
        return list(DEFAULT_BASE_FLAGS)
    for i, word in enumerate(argv[:-1]):
        if (word, argv[i + 1]) in (("-m", "sim"), ("sim", "serve")):
            return argv[i + 2 :]
    return list(DEFAULT_BASE_FLAGS)


def engine_check(engine: str, command: str | None = None) -> Check | None:
    if engine != "sim":
        return None
    from sim.flags import FlagError, parse_server_args, to_argv

    base = sim_base_argv(command)

    def check(flags: Flags) -> str | None:
        try:
            parse_server_args([*base, *to_argv(flags)], prog="sim serve")
        except FlagError as err:
            return str(err)
        except SystemExit:  # argparse refuses a value outright
            return "the simulator's argument parser refuses this command line"
        return None

    return check


def space_of(config: Config) -> SearchSpace:
    """The search space of an tools.domain.config.Config (SearchError when it is malformed)."""
    # with a profile file, `engine` is a label only (its default is "sim"): not the simulator
    engine = "" if config.server.profile else config.server.engine
    check = engine_check(engine, config.server.command)
    return SearchSpace.parse(config.search, check=check)
