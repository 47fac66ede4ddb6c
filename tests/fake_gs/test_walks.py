"""The fake's layout, as the architecture page measures it, held: a poll visits each file once, a
forward-backward chunk each stage of the frame intake, and the training handlers import few kit
modules (``walks.py`` says how each is counted)."""

from __future__ import annotations

from walks import handler_imports, walks


def test_a_poll_visits_each_file_once_and_a_chunk_each_intake_stage_once() -> None:
    chunk, poll = walks()
    assert poll.returns == 0, poll.describe()
    assert poll.files >= 5, poll.describe()  # the walk saw the fake's layers, not nothing
    # The chunk walk visits each stage of the frame intake once; what returns is where one
    # thing is used at two moments of the call, each named on docs/architecture.md (54
    # returns before the backend, 45 before the intake's stages, 8 now). It may not get
    # worse, and a better count is held here.
    assert chunk.files >= 20, chunk.describe()  # the intake's stages and the backend, not nothing
    assert chunk.returns <= 8, chunk.describe()
    intake = [stop for stop in chunk.stops if stop.startswith("chunking/")]
    # Only the frame's hash is met twice: fed as the payload arrives, settled once the chunk
    # is judged (buffer.py) and read when the frame is whole (digest.py).
    assert {stop for stop in intake if intake.count(stop) > 1} <= {"chunking/buffer.py", "chunking/digest.py"}, \
        chunk.describe()


def test_the_training_and_polling_handlers_import_at_most_what_they_render_with() -> None:
    imports = handler_imports()
    assert imports["training.py"] <= 6 and imports["frame_requests.py"] <= 7, imports
    assert all(n <= 6 for name, n in imports.items() if name != "frame_requests.py"), imports
