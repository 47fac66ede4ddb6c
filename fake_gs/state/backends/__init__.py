"""The routes' backends: one class per group of routes, one method per route, each with the
rules it asks and the work it does beside the state it changes (``jobs``: the control
plane; ``checkpoints``; ``training``; ``sampling``; ``operations``; ``statements``: the
execution-log SQL statement). A handler parses its call, makes one call here, and renders.

May import: the rest of ``fake_gs.state`` (the store, the job table, the request queue,
the records), ``fake_gs.chunking``, ``fake_gs.engines``, ``fake_gs.answers.render``, ``check``
and ``delivery``, ``fake_gs.controls`` and ``contract``; never ``fake_gs.http``.
"""
