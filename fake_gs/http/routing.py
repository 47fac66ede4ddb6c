"""The fake's router: one Starlette route per contract PATH, not per (method, path).

Why: a 405 must list every method the path supports (RFC 9110 and the OpenAPI document),
and a request must go to the path it most specifically names. Starlette alone answers a
405 with the methods of the first route whose template matched, and lets ``/{job_id}``
claim ``/x:cancel`` or ``/capacity``. Here each path template is one route serving all of
its methods, and a template steps aside when a more specific one (more literal text)
matches the same URL.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from starlette._utils import get_route_path
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Route
from starlette.types import Receive, Scope, Send

from contract.routes import PREFIX_TEMPLATE
from contract.routes import Route as Spec

Endpoint = Callable[[Request], Awaitable[Response]]


class PathRoute(Route):
    """All methods of one path template; yields to more specific templates."""

    def __init__(self, path: str, endpoints: dict[str, Endpoint], name: str,
                 one_route: Callable[[], bool] = lambda: False) -> None:
        self.by_method = dict(endpoints)
        #: The bend ``allow-one-route``: a 405 lists the first route's method only.
        self.one_route = one_route

        async def endpoint(request: Request) -> Response:
            method = "GET" if request.method == "HEAD" else request.method
            return await self.by_method[method](request)

        super().__init__(path, endpoint, methods=sorted(endpoints), name=name)
        self.shadowed_by: list[PathRoute] = []

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        found, child = super().matches(scope)
        if found is not Match.NONE and any(r.path_regex.match(_route_path(scope)) for r in self.shadowed_by):
            return Match.NONE, {}
        return found, child

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.methods and scope["method"] not in self.methods:
            raise HTTPException(status_code=405, headers={"Allow": ", ".join(self.allowed())})
        await self.app(scope, receive, send)

    def allowed(self) -> list[str]:
        """The documented methods first, then the HEAD every GET route also answers."""
        methods = list(self.by_method)[:1] if self.one_route() else sorted(self.by_method)
        return methods + (["HEAD"] if "GET" in methods else [])


def _route_path(scope: Scope) -> str:
    return get_route_path(scope)


def _literal_size(template: str) -> int:
    """How much of a template is literal text: the more, the more specific."""
    size, depth = 0, 0
    for ch in template:
        depth += ch == "{"
        size += depth == 0
        depth -= ch == "}"
    return size


def _sample(template: str) -> str:
    """A concrete URL of ``template`` (every parameter ``p``), to test shadowing with."""
    out, depth = [], 0
    for ch in template:
        if ch == "{":
            depth += 1
            if depth == 1:
                out.append("p")
        elif ch == "}":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def path_routes(specs: Sequence[Spec], endpoint_of: Callable[[Spec], Endpoint],
                hot: Sequence[str] = (), one_route: Callable[[], bool] = lambda: False) -> list[BaseRoute]:
    """One :class:`PathRoute` per distinct path; ``hot`` route names are tried first;
    ``one_route`` says when the bend ``allow-one-route`` is on."""
    grouped: dict[str, dict[str, Endpoint]] = {}
    names: dict[str, list[str]] = {}
    for spec in specs:
        endpoint = endpoint_of(spec)
        paths = [PREFIX_TEMPLATE + spec.path]
        if spec.path == "/":  # the collection answers with and without the trailing slash
            paths.append(PREFIX_TEMPLATE)
        for path in paths:
            grouped.setdefault(path, {})[spec.method] = endpoint
            names.setdefault(path, []).append(spec.name)
    routes = [PathRoute(path, eps, "+".join(names[path]), one_route) for path, eps in grouped.items()]
    for route in routes:
        route.shadowed_by = [
            other for other in routes
            if other is not route and _literal_size(other.path) > _literal_size(route.path)
            and route.path_regex.match(_sample(other.path))
        ]
    routes.sort(key=lambda r: not any(n in hot for n in r.name.split("+")))
    out: list[BaseRoute] = list(routes)
    return out


__all__ = ["PathRoute", "path_routes"]
