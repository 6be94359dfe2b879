"""Credentials never leave the process: every URI or error text that is logged or returned goes
through ``redact`` first. A tracking URI like ``http://user:pass@host`` and a presigned object-store
URL both carry secrets, and library errors quote them verbatim."""

from __future__ import annotations

import logging
import re

# scheme://user:password@host -> scheme://***@host (any userinfo, with or without a password; up
# to the authority's last "@", so a password holding a raw "@" is hidden whole)
USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.\-]*://)[^/\s'\"]*@")
# ?password=..., &token=..., X-Amz-Signature=... in query strings and key=value texts
SECRET_PARAMS = re.compile(
    r"(?P<key>(?:password|passwd|pwd|token|secret|api[_-]?key|signature|credential|x-amz-[a-z-]+)=)"
    r"[^&\s'\"]+",
    re.IGNORECASE,
)


def redact(text: str | None) -> str | None:
    """The same text with URI credentials and secret query parameters replaced by ``***``."""
    if text is None:
        return None
    text = USERINFO.sub(r"\g<scheme>***@", text)
    return SECRET_PARAMS.sub(r"\g<key>***", text)


class RedactingFormatter(logging.Formatter):
    """A handler's own formatter, with the finished line (traceback included) passed through
    ``redact``: a library's exception text or asyncio's "exception was never retrieved" report
    would otherwise print a tracking URI's password to the log."""

    def __init__(self, inner: logging.Formatter | None = None) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        return redact(self.inner.format(record)) or ""


def redact_handlers(logger: logging.Logger) -> None:
    """Wrap the formatter of each of ``logger``'s handlers (once) in a ``RedactingFormatter``."""
    for handler in logger.handlers:
        if not isinstance(handler.formatter, RedactingFormatter):
            handler.setFormatter(RedactingFormatter(handler.formatter))
