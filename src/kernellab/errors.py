"""The one exception type the CLI turns into a one-line message."""


class LabError(Exception):
    """A failure the user can act on; the message says what to do.

    Anything else escaping to the CLI is a bug in kernellab.
    """
