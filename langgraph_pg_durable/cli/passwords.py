"""Messages without the connection's password: libpq quotes a whole URI it cannot parse
(`postgresql://u:secret@[bad/db`), and the piece of it it cannot decode, in its errors."""

from __future__ import annotations

import re
from urllib.parse import unquote

import psycopg
from psycopg.conninfo import conninfo_to_dict

MASK = "***"

# scheme://user:PASSWORD@ (libpq ends the user info at the first '@' or '/').
_URI_PASSWORD = re.compile(r"(?P<keep>\b[a-z][a-z0-9+.-]*://[^\s:/@\"']*:)(?P<password>[^\s/@\"']*)(?=@)", re.IGNORECASE)
# password=PASSWORD in key=value form or a URI's query: quoted (libpq's '...' with \' inside) or bare.
_PASSWORD_SETTING = re.compile(r"(?P<keep>\bpassword\s*=\s*)(?P<password>'(?:[^'\\]|\\.)*'?|[^\s&#'\"]*)", re.IGNORECASE)


def passwords_in(dsn: str) -> set[str]:
    """Every form the password of `dsn` may take in a message: as written, percent-decoded,
    unquoted, and as libpq reads it."""
    written = {m.group("password") for pattern in (_URI_PASSWORD, _PASSWORD_SETTING) for m in pattern.finditer(dsn)}
    found = written | {unquote(p) for p in written}
    found |= {re.sub(r"\\(.)", r"\1", p.strip("'")) for p in written if p.startswith("'")}
    try:
        found.add(conninfo_to_dict(dsn).get("password") or "")
    except psycopg.Error:
        pass  # a connection string libpq cannot parse: the forms found above are all there is
    return {p for p in found if p and p != MASK}


def without_passwords(message: str, dsn: str | None = None) -> str:
    """`message` with the password of `dsn` (in any form, wherever it appears) and the
    password of any connection string quoted in it replaced by ***."""
    for secret in sorted(passwords_in(dsn) if dsn else (), key=len, reverse=True):
        message = message.replace(secret, MASK)
    message = _URI_PASSWORD.sub(lambda m: m.group("keep") + MASK, message)
    return _PASSWORD_SETTING.sub(lambda m: m.group("keep") + MASK, message)
