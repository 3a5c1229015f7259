"""Where campaign-agent keeps what it builds or learns once per machine: llama-server builds, the
`--help` of each engine version. $CAMPAIGN_CACHE, else $XDG_CACHE_HOME/campaign-agent, else
~/.cache/campaign-agent."""

from __future__ import annotations

import os
from pathlib import Path

# CI's shared cache (.ci/build-llama-server): looked in too, so a build made there is reused
SHARED = Path("/var/cache/campaign-agent")


def user_cache_dir() -> Path:
    if os.environ.get("CAMPAIGN_CACHE"):
        return Path(os.environ["CAMPAIGN_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "campaign-agent"


def cache_dirs() -> list[Path]:
    """Where to look for something cached: the user's cache first, then the shared one."""
    return list(dict.fromkeys([user_cache_dir(), SHARED]))
