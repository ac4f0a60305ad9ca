"""Whether the API host answers at all, found out in at most about 3 s and before anything heavy is imported
(PyGithub alone takes about a second to import on a busy machine): the name resolves within 1.5 s and a TCP
connection opens within 1.5 s. Skipped when a proxy carries the request (the proxy resolves the name)."""

from __future__ import annotations

import socket
import threading
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

from retriage.miner.client import GitHubError

CONNECT_TIMEOUT = 1.5  # seconds, for the name lookup and for the TCP connection each


def _resolve(host: str, port: int, seconds: float) -> list | None:
    """getaddrinfo within `seconds` (it has no timeout of its own), or None."""
    box: dict = {}

    def work():
        try:
            box["addrs"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError:
            box["addrs"] = None

    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(seconds)
    return box.get("addrs")


def proxied(url: str) -> bool:
    parts = urlsplit(url)
    proxies = getproxies()
    return bool(proxies.get(parts.scheme) or proxies.get("all")) and not proxy_bypass(parts.hostname or "")


def check_reachable(base_url: str, seconds: float = CONNECT_TIMEOUT) -> None:
    """GitHubError (kind "unavailable", one line) when the host of `base_url` cannot be reached."""
    parts = urlsplit(base_url)
    host = parts.hostname
    if not host or proxied(base_url):
        return
    port = parts.port or (443 if parts.scheme == "https" else 80)
    addrs = _resolve(host, port, seconds)
    if not addrs:
        raise GitHubError(f"cannot reach {host}: the name does not resolve", kind="unavailable")
    family, kind, proto, _, address = addrs[0]
    try:
        with socket.socket(family, kind, proto) as s:
            s.settimeout(seconds)
            s.connect(address)
    except OSError as e:
        why = "timed out" if isinstance(e, (socket.timeout, TimeoutError)) else (e.strerror or type(e).__name__)
        raise GitHubError(f"cannot reach {host}:{port}: {why.lower()}", kind="unavailable") from None
