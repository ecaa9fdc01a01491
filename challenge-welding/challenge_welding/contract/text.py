"""Text from a participant's process made inert before it leaves: console, logs, JSON, pages.

A submission's error message, traceback and output are its own bytes. Printed raw, an escape
sequence erases the evaluator's error line and writes a forged "ingestion ok" in its place;
a bidi override reorders a line on a page. :func:`inert` replaces every such character with
its visible Python escape (``\\x1b``, ``\\r``, ``\\u202e``): the text stays readable, the
sequence shows what was sent, and nothing of it acts on a terminal or a page.

Replaced: C0 controls but newline and tab, DEL, C1 controls (U+0080-U+009F, which some
terminals read as CSI), the line and paragraph separators (U+2028, U+2029) and the bidi
embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069). Not replaced: every other
character, whatever its script. Idempotent: an escape it wrote holds no control character.
"""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match) -> str:
    c = match.group()
    if c == "\r":
        return "\\r"
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert(text: str) -> str:
    """``text`` with its control characters replaced by visible escapes (see the module)."""
    return _CONTROL.sub(_escape, text)


def inert_bytes(data: bytes) -> bytes:
    """:func:`inert` of UTF-8 bytes (invalid bytes become U+FFFD), as UTF-8 bytes."""
    return inert(data.decode("utf-8", errors="replace")).encode("utf-8")
