"""The suite's sessions read each answer under what its route can legitimately answer.

A :class:`client.calls.bounded_read.BoundedAdapter` caps every answer of a session at one
number (the reader's 1 GiB), so a hostile server's endless answer to a capacity probe cost
the suite a whole GiB before it stopped. :class:`RouteBounds` gives each exchange the cap of
the route it calls (:func:`contract.limits.answer_bound`: a job, a job list, an operation's
inline answer, anything else small; only a poll page, which carries results, keeps the
reader's cap). Every reader of the session (the raw driver, the kit client's streamed reads,
the recorder's and the cost counter's hooks) then stops at that bound, and the error names
the route and its bound (:class:`AnswerBeyondRoute`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import requests

from client.calls.bounded_read import AnswerTooBig, BoundedAdapter
from contract.limits import MAX_ANSWER_BYTES, MAX_ANSWER_INFLATION, MiB, answer_bound
from contract.routes import route_of


class AnswerBeyondRoute(AnswerTooBig):
    """An answer ran past what its route can legitimately answer (or the reader's cap)."""


class OverlongAnswer(AssertionError):
    """What the raw driver raises for an :class:`AnswerBeyondRoute`: a server that answers
    more than the call can return is judged wrong (red, with this message), not a crash."""


def _refusal(name: str, bound: int, exc: AnswerTooBig) -> AnswerBeyondRoute:
    return AnswerBeyondRoute(
        f"{name} answered more than {bound} bytes ({bound / MiB:g} MiB), more than it can "
        f"legitimately answer (contract.limits.answer_bound); refused before reading it all ({exc})")


class _NamedBody:
    """``response.raw`` whose over-bound error names the route and its bound."""

    def __init__(self, raw: Any, name: str, bound: int) -> None:
        self._raw, self._name, self._bound = raw, name, bound

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._raw, attr)

    def stream(self, *args: Any, **kwargs: Any) -> Iterator[bytes]:
        try:
            yield from self._raw.stream(*args, **kwargs)
        except AnswerBeyondRoute:
            raise
        except AnswerTooBig as exc:
            raise _refusal(self._name, self._bound, exc) from None

    def read(self, *args: Any, **kwargs: Any) -> bytes:
        try:
            return bytes(self._raw.read(*args, **kwargs))
        except AnswerBeyondRoute:
            raise
        except AnswerTooBig as exc:
            raise _refusal(self._name, self._bound, exc) from None


class RouteBounds(BoundedAdapter):
    """A :class:`BoundedAdapter` whose byte cap, per exchange, is what the called route can
    legitimately answer under ``max_bytes``; a path no route has keeps ``max_bytes``. One
    inner adapter per distinct bound (a handful) carries the exchanges of that bound."""

    def __init__(self, max_bytes: int = MAX_ANSWER_BYTES,
                 max_inflation: float = MAX_ANSWER_INFLATION, **kwargs: Any) -> None:
        super().__init__(max_bytes, max_inflation, **kwargs)
        self._inner: dict[int, BoundedAdapter] = {}

    def bound_of(self, request: requests.PreparedRequest) -> tuple[str, int]:
        """The route ``request`` calls (``unrouted``: none) and the most its answer may hold."""
        found = route_of(request.method or "", request.url or "")
        if found is None:
            return "unrouted", self.max_bytes
        return found.name, answer_bound(found.name, self.max_bytes)

    def send(self, request: requests.PreparedRequest, stream: bool = False, timeout: Any = None,
             *args: Any, **kwargs: Any) -> requests.Response:
        name, bound = self.bound_of(request)
        adapter: BoundedAdapter = self
        if bound < self.max_bytes:
            adapter = self._inner.get(bound) or self._inner.setdefault(
                bound, BoundedAdapter(bound, self.max_inflation))
        send = super().send if adapter is self else adapter.send
        try:
            response = send(request, True, timeout, *args, **kwargs)
        except AnswerTooBig as exc:
            raise _refusal(name, bound, exc) from None
        response.raw = _NamedBody(response.raw, name, bound)
        if not stream:
            try:
                response.content  # noqa: B018 - read now, under the bounds
            except BaseException:
                response.close()
                raise
        return response

    def close(self) -> None:
        super().close()
        for adapter in self._inner.values():
            adapter.close()


def mount_route_bounds(session: requests.Session, max_bytes: int = MAX_ANSWER_BYTES) -> requests.Session:
    """``session`` with a :class:`RouteBounds` for http and https (returned for chaining)."""
    from client.calls.bounded_read import mount_bounds

    mount_bounds(session, max_bytes)  # its auth that leaves the session's headers alone
    adapter = RouteBounds(max_bytes)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session
