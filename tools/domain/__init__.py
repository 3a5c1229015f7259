"""The domain: run configuration, search space, objective, campaign statistics."""
