"""Kernel configurations: .config parsing, fragments and resolution."""
