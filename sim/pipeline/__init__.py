"""A GPU-free EAGLE-3 drafter pipeline: data generation, data check, hidden-state extraction,
vocabulary mapping, training, checkpoint conversion - real processes, time-scaled like the
simulator, that the agent runs as long jobs (docs/pipeline.md)."""
