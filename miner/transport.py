"""The HTTP transport under PyGithub: a total deadline per request and rate-limit headers made safe to read.

`install(requester, deadline)` mounts `DeadlineAdapter` in the requests session of a PyGithub Requester. Each
request then gets a watchdog: when `deadline` seconds pass before the last byte of the answer (a server
trickling a byte every few seconds never trips a read timeout, which counts silence between bytes), the socket is
shut down and the request raises `DeadlineExceeded`. The adapter also drops `x-ratelimit-*` headers that are not
one number ("4000, 0" from a duplicated header) before PyGithub, which parses them with float(), can see them.
"""

from __future__ import annotations

import socket
import threading

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

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


def install(requester, deadline: float, connect_timeout: float, read_timeout: float) -> None:
    """Mount the adapter in the session PyGithub's Requester uses for its host (made now, reused after)."""
    connection = requester._Requester__createConnection()  # PyGithub keeps one per host (persist)
    adapter = DeadlineAdapter(deadline, connect_timeout, read_timeout, max_retries=0)
    connection.session.mount("http://", adapter)
    connection.session.mount("https://", adapter)
    connection.adapter = adapter
