"""Which `Host` names a local server answers to, one rule for `llamay serve` and `llamay web`.

A page in the user's browser can make its requests same-origin with a local server by DNS rebinding: a name of
the attacker's (evil.example) that first resolves to the attacker and then to 127.0.0.1. Rebinding needs a
name, so the rule answers every IP address (a page reached by address is on that address's own origin), the
loopback names (`localhost` and anything under `.localhost`: RFC 6761, never resolved outside the machine), the
address or name the server is bound to, and the names the user allows (`--allowed-host`: a name, `.example.com`
for the domain and its subdomains, `*` for any, e.g. behind a proxy that checks names itself). Any other name is
refused, as is an empty or malformed Host. A request with no Host at all (HTTP/1.0) comes from no browser
(every browser sends one) and is answered.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

LOOPBACK_NAMES = ("localhost",)  # and any name under .localhost
LOOPBACK_DOMAIN = ".localhost"
ANY = "*"


def host_name(host: str) -> str:
    """The name in a Host header, without its port or brackets, lower case, without a final dot ("" if
    malformed: an unclosed bracket, or an IPv6 address without brackets but with a port cannot be told apart)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else ""
    return host.rsplit(":", 1)[0].rstrip(".") if host.count(":") == 1 else host.rstrip(".")


def is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def name_matches(name: str, allowed: str) -> bool:
    """`allowed` as --allowed-host takes it: `*`, a name (any port), or `.domain` (the domain and below)."""
    if allowed == ANY:
        return True
    if allowed.startswith("."):
        domain = host_name(allowed[1:])
        return bool(domain) and (name == domain or name.endswith(f".{domain}"))
    return name == host_name(allowed)


def host_allowed(host: str | None, allowed: Iterable[str] = ()) -> bool:
    """Whether a request with this Host header (None: none sent) is answered; `allowed` holds the bound address
    and the --allowed-host names."""
    if host is None:
        return True
    name = host_name(host)
    if not name:
        return False
    if is_ip(name) or name in LOOPBACK_NAMES or name.endswith(LOOPBACK_DOMAIN):
        return True
    return any(name_matches(name, a.strip().lower()) for a in allowed)
