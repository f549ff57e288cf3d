"""The metric catalog: every number kernellab reports, with its unit, direction, group and source (metrics.toml)."""
