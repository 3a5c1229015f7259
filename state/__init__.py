"""What lasts: the event log, the todo store, the experiment ledger, run folders.

state/ imports nothing of the agent: it is plain storage and folds over stored events.
"""
