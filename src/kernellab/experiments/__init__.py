"""Experiments: what to build and run, and how to put the results side by side."""
