"""The fake's layout, as the architecture page measures it, held: a poll visits each file once, and the
training handlers import few kit modules (``walks.py`` says how each is counted)."""

from __future__ import annotations

from walks import handler_imports, walks


def test_a_poll_visits_each_file_once_and_a_chunk_walk_is_measured() -> None:
    chunk, poll = walks()
    assert poll.returns == 0, poll.describe()
    assert poll.files >= 5, poll.describe()  # the walk saw the fake's layers, not nothing
    # The chunk walk has not reached one visit per file yet (docs/architecture.md); it
    # may not get worse than it is (54 returns before the backend, 45 now).
    assert 0 < chunk.returns <= 45, chunk.describe()


def test_the_training_and_polling_handlers_import_at_most_what_they_render_with() -> None:
    imports = handler_imports()
    assert imports["training.py"] <= 6 and imports["frame_requests.py"] <= 7, imports
    assert all(n <= 6 for name, n in imports.items() if name != "frame_requests.py"), imports
