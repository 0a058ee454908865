"""A member's metrics: measured from its own executions, served on ``/metrics`` (see the modules)."""
