"""The planner: turns a Pipeline's graph of transforms into a Core DAG."""
