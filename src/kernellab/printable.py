"""Text from outside kernellab (a report, a console log, the store, the user's own words)
made safe to show: every character a terminal would act on, or XML 1.0 refuses, written as
an escape (\\x1b), so that what the reader sees is what is there.

The one definition of "unprintable": error messages (one line each), the terminal views
and the JUnit XML all use it.
"""

from __future__ import annotations

import re

# C0 and C1 controls but newline and tab, the line and paragraph separators, the bidi
# overrides and isolates (they reorder what is shown), lone surrogates (not encodable:
# writing one is an error) and the two non-characters XML 1.0 refuses.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                          "\ud800-\udfff\ufffe\uffff]")
_LINE_BREAKING = re.compile("[\n\t]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, one_line: bool = False) -> str:
    """`text` with every unprintable character escaped; line ends stay (a console's CR LF
    as LF: the CR has no visible effect) unless `one_line`, where newline and tab are
    escaped too, as `\\n` and `\\t`."""
    shown = _UNPRINTABLE.sub(_escape, text.replace("\r\n", "\n"))
    if one_line:
        shown = _LINE_BREAKING.sub(lambda m: "\\n" if m.group() == "\n" else "\\t", shown)
    return shown
