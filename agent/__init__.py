"""campaign-agent: the loop and what drives it (CLI, config, brains, compaction, report, watch)."""
