"""Cluster topology: providers (where it comes from), the graph model, and renderers (what it is written into)."""
