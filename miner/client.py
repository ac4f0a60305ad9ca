"""HTTP to the GitHub REST API through PyGithub: the token, conditional requests, rate limits and retries.

Every request goes through PyGithub's Requester pointed at `base_url` (api.github.com, a GitHub Enterprise
`https://host/api/v3`, or a local server), with PyGithub's own retries off: this module decides. Rules, as
GitHub documents them:

- 403/429 with `retry-after`: wait that long. 403/429 with `x-ratelimit-remaining: 0`: wait until
  `x-ratelimit-reset`. Other 403/429 that say "rate limit" (secondary limits): wait at least a minute, doubling.
- 5xx, connection errors and truncated or invalid JSON: retry with capped exponential backoff, then give up
  with a GitHubError.
- Every wait is bounded by `RetryPolicy.max_wait` (longer: a GitHubError that says when to come back) and
  reported tick by tick through `on_wait(seconds_left, reason)`. `retry-after` may be seconds or an HTTP date.
- `max_requests` bounds waiting too: with the budget spent (no request may follow a wait), a rate limit or a
  backoff is not waited out; RequestBudgetExhausted says at once what the run stopped before.
- Every request has a total deadline (`RetryPolicy.deadline`, connect to last byte): a reply trickling a byte
  at a time is cut there and retried like a broken connection.
- A host that was never reached (refused, unknown name, connect timeout) fails at once: no retries.
- Rate-limit headers that are not one number (duplicated: "4000, 0") are ignored, never an error.

The token is read from GH_TOKEN, else GITHUB_TOKEN (as gh does); it only ever lives in the Authorization header. Messages
this module makes are passed through `redact`, so not even a server echoing it back puts it in an error.
"""

from __future__ import annotations


import http.client
import json
import os
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit

from retriage.core.secrets import redact
from retriage.core.secrets import register as register_secret
from retriage.miner.defaults import DEFAULT_BASE_URL, TOKEN_VARS  # noqa: F401  (re-exported)
USER_AGENT = "retriage-miner"

WaitCallback = Callable[[float, str], None]


class GitHubError(Exception):
    """A request that failed for good; the message is one safe line (no token). `kind`: "auth" (bad
    credentials), "rate_limit" (limited for longer than we wait), "unavailable" (server or network kept failing),
    "unreachable" (the host never answered), "refused" (any other answer: not found, forbidden, invalid)."""

    def __init__(self, message: str, status: int | None = None, kind: str = "refused"):
        super().__init__(message)
        self.status = status
        self.kind = kind

    @property
    def affects_all(self) -> bool:
        """Every other repository would fail the same way now."""
        return self.kind in ("auth", "rate_limit", "unreachable")

    @property
    def retryable(self) -> bool:
        """A later run may well succeed."""
        return self.kind in ("rate_limit", "unavailable", "unreachable")


class RequestBudgetExhausted(Exception):
    """--max-requests reached: stop cleanly, everything acknowledged is stored. `waiting`: the rate limit the run
    stopped before instead of waiting it out (with when to come back), if any."""

    def __init__(self, message: str, waiting: str | None = None):
        super().__init__(message)
        self.waiting = waiting


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 6               # tries of one request on 5xx, connection errors, broken bodies
    backoff_base: float = 1.0       # first retry delay, doubled each time ...
    backoff_cap: float = 60.0       # ... up to this
    secondary_wait: float = 60.0    # first wait on a secondary rate limit, doubled each time
    rate_limit_waits: int = 5       # rate-limit waits for one request before giving up
    max_wait: float = 3900.0        # no single wait longer than this (primary limits reset within the hour)
    reset_margin: float = 1.0       # seconds added after x-ratelimit-reset
    tick: float = 1.0               # how often on_wait hears the countdown
    connect_timeout: float = 3.0    # seconds to open a connection
    read_timeout: float = 30.0      # seconds of silence while reading
    deadline: float = 60.0          # seconds for a whole request, connect to last byte


@dataclass
class Page:
    status: int                     # 200 or 304
    data: Any                       # parsed JSON (None on 304)
    etag: str | None
    next_url: str | None


@dataclass
class _Retry:
    reason: str
    wait: float | None = None       # None: back off and count a failure; seconds: a rate limit's wait


def token_from_env(env: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if env is None else env
    for var in TOKEN_VARS:
        value = (env.get(var) or "").strip()
        if value:
            return value
    return None


def _one_line(text: str, limit: int = 160) -> str:
    """One line of at most `limit` characters, secrets masked before it is cut (a cut token is still a token)."""
    text = " ".join(redact(str(text)).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _until(seconds: float) -> str:
    """The UTC clock time `seconds` from now, rounded up to the minute ("14:05 UTC": not before), with the date
    when it is not within the next 12 hours; a wait too long for a date (a server saying 1e20 s) never raises."""
    try:
        when = datetime.fromtimestamp(-(-(time.time() + seconds) // 60) * 60, timezone.utc)
    except (OverflowError, OSError, ValueError):
        return "a time too far ahead to print"
    return when.strftime("%H:%M UTC" if seconds <= 12 * 3600 else "%Y-%m-%d %H:%M UTC")


def raw_request(gh, method: str, url: str, params: dict | None, headers: dict, payload: Any = None
                ) -> tuple[int, dict, str]:
    """One request through PyGithub with our headers, answered as (status, lowercased headers, body text) whatever
    the status. The one place beyond PyGithub's object API: conditional GETs (If-None-Match -> 304, which
    PaginatedList cannot report) and pages whose `next` link and ETag the sync keeps. Requester.requestJson is
    public but undocumented; tests/test_miner_sync.py::test_raw_request_contract fails if it changes."""
    return gh.requester.requestJson(method, url, parameters=params, headers=headers, input=payload)


class GitHubClient:
    """GET pages from the GitHub REST API with bounded, reported waits and a request budget."""

    def __init__(self, base_url: str = DEFAULT_BASE_URL, token: str | None = None,
                 policy: RetryPolicy | None = None, seconds_between_requests: float = 0.0,
                 max_requests: int | None = None, on_wait: WaitCallback | None = None,
                 per_page: int = 100):
        from github import Auth, Github  # heavy: only when a client is made

        from retriage.miner import transport

        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise GitHubError(f"--base-url must be an http(s) URL such as {DEFAULT_BASE_URL}, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self._origin = (parts.scheme, parts.hostname, parts.port)
        self._token = token
        register_secret(token)
        self.authenticated = token is not None
        self.policy = policy or RetryPolicy()
        self.max_requests = max_requests
        self.on_wait = on_wait
        self.per_page = per_page
        self.requests = 0
        self.answered = 0               # requests that got an HTTP answer (any status)
        self._secondary_hits = 0
        self.rate_remaining: int | None = None
        self.rate_limit: int | None = None
        self.rate_reset: int | None = None
        transport.install()
        self._settings = transport.Settings(self.policy.deadline, self.policy.connect_timeout,
                                            self.policy.read_timeout)
        self.gh = Github(auth=Auth.Token(token) if token else None, base_url=self.base_url, per_page=per_page,
                         retry=self._settings, timeout=int(self.policy.read_timeout),
                         seconds_between_requests=seconds_between_requests or None, user_agent=USER_AGENT)

    def close(self) -> None:
        self.gh.close()
        self._settings.close()

    def redact(self, text: str) -> str:
        """`text` with this client's token (any case, base64, any 12 characters of it) and every token-shaped
        string masked (retriage.core.secrets)."""
        return redact(text)

    @property
    def host(self) -> str:
        scheme, host, port = self._origin
        return f"{scheme}://{host}" + (f":{port}" if port else "")

    # -- one GET, with the whole retry policy ------------------------------------------------------------------
    def get(self, url: str, params: dict | None = None, etag: str | None = None) -> Page:
        """GET `url` (a path under base_url or a Link URL as given). 200 -> data, 304 -> not modified."""
        self._check_same_origin(url)
        headers = {"Accept": "application/vnd.github+json"}
        if etag:
            headers["If-None-Match"] = etag
        failures = rate_waits = 0
        while True:
            self._check_budget()  # before any wait for a reset: with no request left, nothing to wait for
            self._wait_for_reset_if_exhausted()
            self.requests += 1
            try:
                outcome = self._attempt(url, params, dict(headers))
            except GitHubError as e:  # whatever the server put in it, never the token
                raise GitHubError(self.redact(str(e)), e.status, e.kind) from None
            if isinstance(outcome, Page):
                self._secondary_hits = 0
                return outcome
            if outcome.wait is not None:  # a rate limit: wait as told; not a failure, but bounded too
                rate_waits += 1
                if rate_waits > self.policy.rate_limit_waits:
                    raise GitHubError(self.redact(f"{outcome.reason}; still limited after {rate_waits - 1} "
                                                  f"waits, run again later"), kind="rate_limit")
                self._check_budget(outcome.wait, outcome.reason)
                self._wait(outcome.wait, outcome.reason)
                continue
            failures += 1
            if failures >= self.policy.attempts:
                raise GitHubError(self.redact(f"{outcome.reason}; gave up after {failures} attempts"),
                                  kind="unavailable")
            self._check_budget()
            delay = min(self.policy.backoff_cap, self.policy.max_wait,
                        self.policy.backoff_base * 2 ** (failures - 1))
            self._wait(delay, f"{outcome.reason}; retry {failures} of {self.policy.attempts - 1}")

    def _attempt(self, url: str, params: dict | None, headers: dict, method: str = "GET",
                 payload: Any = None) -> Page | _Retry:
        """One request. Raises GitHubError for answers that retrying cannot fix."""
        import requests

        from retriage.miner.transport import DeadlineExceeded, cause, never_connected, next_link

        try:
            status, resp_headers, body = raw_request(self.gh, method, url, params, headers, payload)
        except DeadlineExceeded:
            return _Retry(f"no complete answer from {self._where(url)} within {self.policy.deadline:g} s")
        except requests.exceptions.ConnectionError as e:
            if self.answered == 0 and never_connected(e):
                raise GitHubError(f"cannot reach {self.host} ({cause(e)}): check the network or --base-url",
                                  kind="unreachable") from None
            return _Retry(f"connection failed ({type(e).__name__})")
        except (requests.exceptions.RequestException, http.client.HTTPException, OSError) as e:
            return _Retry(f"connection failed ({type(e).__name__})")
        except RuntimeError as e:  # PyGithub: a redirect to another host or scheme
            raise GitHubError(self.redact(_one_line(str(e)))) from None
        self.answered += 1
        self._note_rate(resp_headers)
        if status == 304:
            return Page(304, None, resp_headers.get("etag") or headers.get("If-None-Match"), None)
        if 200 <= status < 300:
            try:
                data = json.loads(body) if body else None
            except ValueError:
                return _Retry(f"truncated or invalid JSON from {self._where(url)}")
            return Page(status, data, resp_headers.get("etag"), next_link(resp_headers.get("link")))
        message = self._message(body)
        if status in (403, 429):
            retry = self._rate_limit_wait(status, resp_headers, message)
            if retry is not None:
                return retry
            raise GitHubError(self.redact(f"{status} forbidden at {self._where(url)}: {message}"), status)
        if status >= 500:
            return _Retry(f"server error {status} at {self._where(url)}")
        if status == 401:
            raise GitHubError("401 Bad credentials: GitHub rejected the token in GH_TOKEN/GITHUB_TOKEN", 401, "auth")
        if status == 404:
            raise GitHubError(f"404 not found: {self._where(url)} (no such repository, or no access)", 404)
        raise GitHubError(self.redact(f"{status} from {self._where(url)}: {message}"), status)

    def _rate_limit_wait(self, status: int, headers: dict, message: str) -> _Retry | None:
        from retriage.miner.transport import retry_after_seconds

        retry_after = retry_after_seconds(headers.get("retry-after"))
        if retry_after is not None:
            return _Retry(f"{status}: asked to retry after {retry_after:.0f} s", retry_after)
        if headers.get("x-ratelimit-remaining", "").strip() == "0":
            return _Retry("rate limit exhausted", self._until_reset())
        if status == 429 or "rate limit" in message.lower():
            self._secondary_hits += 1
            return _Retry("secondary rate limit", self.policy.secondary_wait * 2 ** (self._secondary_hits - 1))
        return None

    # -- one write (POST, PATCH, DELETE) -----------------------------------------------------------------------
    def send(self, method: str, url: str, payload: Any = None) -> Any:
        """One write; its parsed JSON answer (None for 204). Rate limits are waited out as for a GET (the request
        was refused, so repeating it is safe); a connection error or a 5xx is NOT repeated, as the write may have
        happened: a GitHubError instead."""
        self._check_same_origin(url)
        rate_waits = 0
        while True:
            self._wait_for_reset_if_exhausted()
            self.requests += 1
            outcome = self._attempt(url, None, {"Accept": "application/vnd.github+json"}, method, payload)
            if isinstance(outcome, Page):
                self._secondary_hits = 0
                return outcome.data
            if outcome.wait is None:
                raise GitHubError(self.redact(f"{method} {self._where(url)}: {outcome.reason}; not repeated "
                                              f"(it may have been applied)"), kind="unavailable")
            rate_waits += 1
            if rate_waits > self.policy.rate_limit_waits:
                raise GitHubError(self.redact(f"{outcome.reason}; still limited after {rate_waits - 1} waits, "
                                              f"run again later"), kind="rate_limit")
            self._wait(outcome.wait, outcome.reason)

    # -- rate-limit bookkeeping --------------------------------------------------------------------------------
    def _note_rate(self, headers: dict) -> None:
        def as_int(name):
            try:
                return int(float(headers[name]))
            except (KeyError, ValueError):
                return None

        for attr, name in (("rate_remaining", "x-ratelimit-remaining"), ("rate_limit", "x-ratelimit-limit"),
                           ("rate_reset", "x-ratelimit-reset")):
            value = as_int(name)
            if value is not None:
                setattr(self, attr, value)

    def _until_reset(self) -> float:
        if self.rate_reset is None:
            return self.policy.secondary_wait
        return max(0.0, self.rate_reset - time.time()) + self.policy.reset_margin

    def _check_budget(self, wait: float | None = None, reason: str = "") -> None:
        """RequestBudgetExhausted if --max-requests leaves no request to make: then no wait is worth taking. With
        `wait` (a rate limit's), the exception says what was not waited for and when to come back."""
        if self.max_requests is None or self.requests < self.max_requests:
            return
        if wait is None and self.rate_remaining == 0 and self.rate_reset is not None \
                and self.rate_reset > time.time():
            wait, reason = self._until_reset(), "rate limit exhausted"
        waiting = None if wait is None else self.redact(f"{reason}, until {_until(wait)}")
        raise RequestBudgetExhausted(f"stopped after {self.requests} requests (--max-requests)", waiting)

    def _wait_for_reset_if_exhausted(self) -> None:
        """Remaining 0 after a good answer: the next request would fail, so wait for the reset first."""
        if self.rate_remaining == 0 and self.rate_reset is not None and self.rate_reset > time.time():
            self._wait(self._until_reset(), "rate limit exhausted")
            self.rate_remaining = None

    def _wait(self, seconds: float, reason: str) -> None:
        if seconds > self.policy.max_wait:
            raise GitHubError(self.redact(f"{reason}: GitHub asks to wait {seconds:.0f} s (until {_until(seconds)}), "
                                          f"more than the {self.policy.max_wait:g} s limit; run again then (or "
                                          f"raise --max-wait)"), kind="rate_limit")
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                break
            if self.on_wait:
                self.on_wait(left, reason)
            time.sleep(min(self.policy.tick, left))
        if self.on_wait:
            self.on_wait(0.0, reason)

    # -- helpers -----------------------------------------------------------------------------------------------
    def _check_same_origin(self, url: str) -> None:
        if url.startswith("/"):
            return
        parts = urlsplit(url)
        if (parts.scheme, parts.hostname, parts.port) != self._origin:
            raise GitHubError(f"the server sent a link to another host ({parts.scheme}://{parts.hostname}); "
                              f"not following it")

    def _where(self, url: str) -> str:
        path = urlsplit(url).path if not url.startswith("/") else url.split("?")[0]
        return self.redact(path)

    @staticmethod
    def _message(body: str) -> str:
        try:
            data = json.loads(body)
        except (ValueError, TypeError):
            return _one_line(re.sub(r"<[^>]+>", " ", body or "")) or "no message"
        if isinstance(data, dict) and data.get("message"):
            return _one_line(data["message"])
        return _one_line(body)
