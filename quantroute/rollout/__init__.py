"""Rollouts: an eval-gated, reviewer-approved, guarded canary of a candidate deployment (spec in the policy,
status in the database, transitions decided by `machine.py`)."""
