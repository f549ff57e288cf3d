"""The in-guest measurement agent and how to compile it."""

# The record version this kernellab reads: the agent's RECORD_VERSION (record.h), which
# it states in its t=hello record.  version.check_hello refuses any other; a test keeps
# the two equal, so change both together.
RECORD_VERSION = 1
