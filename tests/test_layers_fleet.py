"""The fleet's place in the layers, with the imports lint-imports does not count: those under
`if TYPE_CHECKING:` (pyproject.toml excludes them from every contract). tools/base.py names the
fleet's trial types for ToolContext.fleet, so a fleet module that reached tools/base.py - even for
a type - would close the circle issue 24.10 removed (base -> fleet/trial.py -> base)."""

from __future__ import annotations

import grimp

PROTOCOL = [
    "tools.base",
    "tools.registry",
    "tools.start_server",
    "tools.run_trial",
    "tools.trial_outcome",
]


def test_the_fleet_reaches_nothing_of_the_tool_protocol_not_even_for_a_type() -> None:
    graph = grimp.build_graph("tools", cache_dir=None)  # type-only imports included
    chains = {
        above: graph.find_shortest_chain(importer="tools.fleet", imported=above, as_packages=True)
        for above in PROTOCOL
    }
    assert {above: chain for above, chain in chains.items() if chain} == {}
