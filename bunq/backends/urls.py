"""Backend URLs as they may be shown: the one place that hides their secrets.

Every message that quotes a backend URL (startup lines, errors, logs) passes
it through :func:`redact` first: a password in the user info and the values
of secret-looking query options (``token``, ``password``, ``secret``,
``key``...) become ``***``. libpq ``key=value`` strings get the same
treatment for their ``password``.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote, urlsplit

MASK = "***"
_SECRET = re.compile(
    r"(pass|pwd|token|secret|key|auth|credential|signature|sig$|session)", re.IGNORECASE
)
_KV_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def redact(url: object) -> str:
    """Return ``url`` as text with its password and secret query values masked."""
    text = str(url)
    if "://" not in text:
        return _KV_PASSWORD.sub(lambda m: m.group(1) + MASK, text)
    try:
        parts = urlsplit(text)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, host = netloc.rpartition("@")
            user, colon, _ = userinfo.partition(":")
            netloc = f"{user}:{MASK}@{host}" if colon else netloc
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            query = "&".join(
                f"{quote(k, safe='')}={MASK if _SECRET.search(k) else quote(v, safe='/:,')}"
                for k, v in pairs
            )
        out = f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
        return out + (f"#{parts.fragment}" if parts.fragment else "")
    except ValueError:  # not parseable as a URL: mask everything after the scheme
        return text.split("://", 1)[0] + "://" + MASK
