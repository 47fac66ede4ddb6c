"""Follow one call through the fake and count where it goes (the architecture page's walks).

A *walk* is the fake's own code one call runs, in the order it first runs it: every
function of ``fake_gs`` entered while the call is served (on any thread: the event loop,
the decode and hashing threads), each function counted once, at its first entry. A *stop*
is a run of consecutive functions of one file; a *return* is a stop in a file the walk had
already left. A walk that visits each file once has no return.

Three walks: the final chunk of a two-chunk forward-backward, from its handler to its
answer (accepted, judged, reassembled, decoded, submitted, answered); the request it
submitted, run on the job's executor once the call is answered (the queue is held until
then, so the two never interleave: the run is a later moment on another thread, and is
its own walk); and a poll of that request's result.

A walk starts at the route's handler: the border before it (``EDGE``: the ASGI app, the
connection, the middleware, authentication, the dispatch and fault rules, the traffic
log) is the same for every route and not counted, nor are the modules every line reads
as vocabulary (``VOCABULARY``: records, refusals, answers' rendering, the clock, the
settings), the tools that know nothing of the API (``TOOLS``: the executors, the threaded
digest, heap trimming) and the engine, whose numbers are the model's and not the fake's
rules.

Run ``python tests/fake_gs/walks.py`` to print the walks.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from fake_gs_api import OCTET, Api, batch, training_config

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "fake_gs"

#: Files before a route's handler (the border every call crosses alike).
EDGE = frozenset({
    "http/app.py", "http/app_state.py", "http/middleware.py", "http/connections.py", "http/h11_internals.py",
    "http/dispatch.py", "http/auth.py", "http/recording.py", "http/routing.py", "http/idempotency.py",
    "http/body.py", "http/admin.py", "controls/traffic.py", "controls/faults.py", "server.py",
})
#: Modules read as vocabulary, not walked: records and errors, the words answers are written
#: in (a model rendered, JSON as bytes), the clock, the settings.
VOCABULARY = frozenset({
    "state/records.py", "answers/refusals.py", "answers/render.py", "clock.py", "settings.py", "options.py",
})
#: Tools that know nothing of the API: the jobs' serial executors, the digest hashed on
#: worker threads in feed order (the frame hash's and the idempotency fingerprint's), heap
#: trimming.
TOOLS = frozenset({"state/executor.py", "digest.py", "heap.py"})


def counted(path: str) -> str | None:
    """``path`` relative to ``fake_gs/`` when the walk counts it, else None."""
    try:
        rel = Path(path).resolve().relative_to(PACKAGE).as_posix()
    except ValueError:
        return None
    if rel in EDGE or rel in VOCABULARY or rel in TOOLS or rel.startswith("engines/") or rel.startswith("testing/"):
        return None
    return rel


#: Where a route's handler lives: a function runs for the handler when the handler's
#: frame is on the event loop's stack (the handler's helpers in ``context.py`` do not
#: count: the border calls them too).
HANDLERS = PACKAGE / "http" / "handlers"


def _in_handler(frame: FrameType | None) -> bool:
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(str(HANDLERS)) and not name.endswith("context.py"):
            return True
        frame = frame.f_back
    return False


@dataclass
class Walk:
    """The functions one call entered, in first-entry order, as ``file:function``."""

    name: str
    functions: list[str]

    @property
    def stops(self) -> list[str]:
        """Runs of consecutive functions of one file, as the file."""
        out: list[str] = []
        for entry in self.functions:
            path = entry.split(":", 1)[0]
            if not out or out[-1] != path:
                out.append(path)
        return out

    @property
    def files(self) -> int:
        return len(set(self.stops))

    @property
    def returns(self) -> int:
        """Stops in a file the walk had already left."""
        return len(self.stops) - self.files

    def summary(self) -> str:
        return f"{self.name}: {len(self.stops)} stops in {self.files} files, {self.returns} returns"

    def describe(self) -> str:
        lines = [self.summary()]
        path = None
        for entry in self.functions:
            file, func = entry.split(":", 1)
            if file != path:
                lines.append(f"  {file}")
                path = file
            lines.append(f"      {func}")
        return "\n".join(lines)


class Recorder:
    """A profile function on every thread the fake starts (set before it starts): while
    ``on``, notes the first entry of each counted function."""

    def __init__(self) -> None:
        self.on = False
        self.seen: dict[str, None] = {}
        self._lock = threading.Lock()
        self._files: dict[str, str | None] = {}
        #: The thread of the fake's event loop, where only what a handler calls counts.
        self.loop_thread: threading.Thread | None = None

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if not self.on or event != "call":
            return
        code = frame.f_code
        rel = self._files.get(code.co_filename, "?")
        if rel == "?":
            rel = self._files[code.co_filename] = counted(code.co_filename)
        if rel is None:
            return
        if threading.current_thread() is self.loop_thread and not _in_handler(frame):
            return  # the border's own work (before the handler, or after it answered)
        with self._lock:
            self.seen.setdefault(f"{rel}:{code.co_qualname}", None)

    @contextmanager
    def walk(self, name: str, out: list[Walk]) -> Iterator[None]:
        self.loop_thread = next(t for t in threading.enumerate() if t.name.startswith("fake-gs:"))
        self.seen = {}
        self.on = True
        try:
            yield
        finally:
            self.on = False
            out.append(Walk(name, list(self.seen)))


def walks() -> list[Walk]:
    """The three walks through a fresh fake (the module docstring says which): the chunk,
    the run of the request it submitted, and a poll of its result."""
    from contract import wire
    from fake_gs import start_in_background

    recorder = Recorder()
    sys.setprofile(recorder)
    threading.setprofile(recorder)
    server = start_in_background()
    out: list[Walk] = []
    try:
        api = Api(server.base_url)
        job = api.running_job(training_config())
        frame = wire.dumps(batch(2, 400), metadata=wire.standard_request_metadata())
        chunks = wire.encode_byte_chunks(frame, "request", operation="forward-backward",
                                         max_bytes=len(frame) // 2 + 8192 + 64, chunk_group_id=str(uuid.uuid4()),
                                         force_chunk=True)
        assert len(chunks) == 2, len(chunks)
        assert api.post(f"/{job}/forward-backward", data=chunks[0], headers=OCTET).status_code == 202
        # The job's queue is held while the chunk is answered, then its work runs: the
        # answer and the execution are two walks, not interleaved by the threads.
        api.admin.hold(job, on=True)
        with recorder.walk("chunk", out):
            answer = api.post(f"/{job}/forward-backward", data=chunks[1], headers=OCTET)
            assert answer.status_code == 200, answer.text
        rid = answer.json()["request_id"]
        with recorder.walk("run", out):
            api.admin.hold(job, on=False)
            _wait(lambda: server.state.store.queue.requests[rid].done_event.is_set())
        with recorder.walk("poll", out):
            polled = api.poll(job, rid)
        assert polled["status"] == "done", polled
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        server.stop()
    return out


KIT = ("contract", "fake_gs", "client", "conformance")


def kit_imports(path: Path) -> set[str]:
    """The kit modules a module imports (``from fake_gs.x import y`` counts ``fake_gs.x.y``
    when that is a module, else ``fake_gs.x``), type-only imports included."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] in KIT)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] in KIT:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if importlib.util.find_spec(sub.split(".")[0]) and _is_module(sub) else node.module)
    return found


def _is_module(name: str) -> bool:
    parts = name.split(".")
    base = ROOT.joinpath(*parts)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def handler_imports() -> dict[str, int]:
    """Kit modules imported by each handler module (``fake_gs/http/handlers/``)."""
    return {p.name: len(kit_imports(p)) for p in sorted((PACKAGE / "http" / "handlers").glob("*.py"))}


def lines_of_code() -> int:
    """Lines of every ``fake_gs`` module (blank lines and docstrings included)."""
    return sum(len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py"))


def _wait(done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError("the request never ran")
        time.sleep(0.005)


if __name__ == "__main__":
    for walk in walks():
        print(walk.describe())
    print("kit imports per handler module:", handler_imports())
    print("lines of fake_gs:", lines_of_code())
