"""The in-guest measurement agent and how to compile it."""
