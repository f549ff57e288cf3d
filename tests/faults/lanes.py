"""How many generated inputs a fault test tries, in each test lane (docs/contributing.md).

A generator's full count (100,000 console streams, say) takes a minute or more; the fast
lane (`-m "not integration"`) tries the first few thousand of the same seeded sequence, and
the full command (the README's, which runs the `integration` lane too) all of them, with the
same checks. A failure the full count finds is one of its inputs, repeatable from its seed.
"""

import pytest


def counts(fast: int, full: int) -> list:
    """Parameters of a generator's count: `fast` in the fast lane, `full` in the full command."""
    assert 0 < fast < full
    return [pytest.param(fast, id=f"first-{fast}"),
            pytest.param(full, id=f"all-{full}", marks=pytest.mark.integration)]
