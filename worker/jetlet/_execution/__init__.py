"""The execution engine: runs a DAG's processors as cooperative tasklets on one member."""
