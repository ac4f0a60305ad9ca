"""The HTTP transport under PyGithub: a total deadline per request and rate-limit headers made safe to read.

`Settings` (a urllib3 Retry that never retries: the client decides) is what a GitHubClient passes to
`Github(retry=...)`; PyGithub hands that object to the connection class it makes, and `install()` makes that
class ours through PyGithub's public `Requester.injectConnectionClasses`. Our class mounts `DeadlineAdapter` in
one requests session per Settings (kept open across requests: PyGithub makes a connection object per request once
classes are injected). A request with plain PyGithub settings is served as PyGithub would. Each request of ours
then gets a watchdog: when `deadline` seconds pass before the last byte of the answer (a server
trickling a byte every few seconds never trips a read timeout, which counts silence between bytes), the socket is
shut down and the request raises `DeadlineExceeded`. The adapter also drops `x-ratelimit-*` headers that are not
one number ("4000, 0" from a duplicated header) before PyGithub, which parses them with float(), can see them.
"""

from __future__ import annotations

import email.utils
import re
import socket
import threading
import time
from datetime import timezone

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.util.retry import Retry

RATE_HEADERS = ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "x-ratelimit-used")
_active = threading.local()  # the watch of the request this thread is making


class DeadlineExceeded(requests.exceptions.Timeout):
    """No complete answer within the deadline."""


class _Watch:
    def __init__(self, seconds: float):
        self.seconds = seconds
        self.expired = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def start(self) -> None:
        self._timer.start()

    def cancel(self) -> None:
        self._timer.cancel()

    def watch(self, sock: socket.socket | None) -> None:
        with self._lock:
            self._sock = sock
            expired = self.expired
        if expired:
            _shutdown(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sock = self._sock
        _shutdown(sock)


def _shutdown(sock: socket.socket | None) -> None:
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)  # wakes a blocked recv at once, unlike close()
        except OSError:
            pass


class _Watched:
    """Mixed into urllib3's connections: the socket an answer is read from is handed to the thread's watch."""

    def getresponse(self, *args, **kwargs):
        watch = getattr(_active, "watch", None)
        if watch is not None:
            watch.watch(getattr(self, "sock", None))
        return super().getresponse(*args, **kwargs)


class _HTTPConnection(_Watched, HTTPConnection):
    pass


class _HTTPSConnection(_Watched, HTTPSConnection):
    pass


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


def one_number(value: str | None) -> str | None:
    """The value if it is one number ("4999", "1.7e9"), else None."""
    if value is None:
        return None
    try:
        float(value)
    except ValueError:
        return None
    return value.strip()


class DeadlineAdapter(HTTPAdapter):
    def __init__(self, deadline: float, connect_timeout: float, read_timeout: float, **kwargs):
        self.deadline = deadline
        self.timeouts = (connect_timeout, read_timeout)
        super().__init__(**kwargs)

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}

    def send(self, request, stream=False, timeout=None, **kwargs):
        kwargs["timeout"] = self.timeouts  # PyGithub passes one number: connecting gets its own, shorter limit
        watch = _active.watch = _Watch(self.deadline)
        watch.start()
        try:
            response = super().send(request, stream=True, **kwargs)
            if not stream:
                response.content  # the whole body, under the watch
        except requests.exceptions.RequestException:
            if watch.expired:
                raise DeadlineExceeded(f"no complete answer within {self.deadline:g} s") from None
            raise
        finally:
            watch.cancel()
            _active.watch = None
        if watch.expired:  # cut after the last byte came in, or a body without a length cut short
            raise DeadlineExceeded(f"no complete answer within {self.deadline:g} s")
        for name in RATE_HEADERS:
            if name in response.headers and one_number(response.headers[name]) is None:
                del response.headers[name]
        return response


def next_link(link_header: str | None) -> str | None:
    """The URL of rel="next" in a Link header, exactly as given."""
    for part in (link_header or "").split(","):
        m = re.match(r'\s*<([^>]*)>\s*;(.*)', part)
        if m and re.search(r'rel="?next"?', m.group(2)):
            return m.group(1)
    return None


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """`retry-after` as seconds: a number of seconds or an HTTP date (RFC 9110), the first of duplicates; None if
    neither."""
    if not value:
        return None
    try:
        return max(0.0, float(value.split(",")[0]))
    except ValueError:
        pass
    m = re.match(r"\s*([^,]*,[^,]*)", value)  # "Wed, 21 Oct 2015 07:28:00 GMT" (and whatever follows)
    try:
        when = email.utils.parsedate_to_datetime(m.group(1) if m else value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def never_connected(e: Exception) -> bool:
    """A connection error from before any byte was exchanged: refused, unknown host, connect timeout."""
    if isinstance(e, requests.exceptions.ConnectTimeout):
        return True
    text = repr(e)
    return any(s in text for s in ("NewConnectionError", "NameResolutionError", "Connection refused",
                                   "Name or service not known", "No route to host", "Network is unreachable",
                                   "nodename nor servname"))


def cause(e: Exception) -> str:
    text = repr(e)
    if isinstance(e, requests.exceptions.ConnectTimeout):
        return "connect timed out"
    for needle, said in (("Connection refused", "connection refused"), ("NameResolutionError", "unknown host"),
                         ("Name or service not known", "unknown host"), ("No route to host", "no route to host"),
                         ("Network is unreachable", "network unreachable")):
        if needle in text:
            return said
    return "no connection"


class Settings(Retry):
    """No retries (the client's loop decides), plus what the transport needs: the deadline and timeouts."""

    def __init__(self, deadline: float = 60.0, connect_timeout: float = 3.0, read_timeout: float = 30.0, **kw):
        kw.setdefault("total", 0)
        kw.setdefault("read", False)
        super().__init__(**kw)
        self.deadline, self.connect_timeout, self.read_timeout = deadline, connect_timeout, read_timeout
        self.session: requests.Session | None = None

    def open_session(self, auth) -> requests.Session:
        if self.session is None:
            self.session = requests.Session()
            self.session.auth = auth  # PyGithub's no-op auth: never a .netrc
            adapter = DeadlineAdapter(self.deadline, self.connect_timeout, self.read_timeout, max_retries=0)
            self.session.mount("http://", adapter)
            self.session.mount("https://", adapter)
        return self.session

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None


def _ours(base):
    class Connection(base):
        def __init__(self, *args, retry=None, **kwargs):
            super().__init__(*args, retry=retry, **kwargs)
            if isinstance(retry, Settings):
                self.session.close()  # PyGithub's own, unused
                self.session = retry.open_session(self.session.auth)

        def close(self) -> None:
            if not isinstance(self.retry, Settings):  # ours is closed with its client
                super().close()
    return Connection


def install() -> None:
    """Make PyGithub's connections ours (once per process; connections without Settings behave as PyGithub's)."""
    from github.Requester import HTTPRequestsConnectionClass, HTTPSRequestsConnectionClass, Requester

    global _installed
    if not _installed:
        Requester.injectConnectionClasses(_ours(HTTPRequestsConnectionClass), _ours(HTTPSRequestsConnectionClass))
        _installed = True


_installed = False
