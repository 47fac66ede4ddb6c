"""Request chunk groups (spec §9.3, §6.1): how a frame sent in chunks becomes whole.

``intake`` takes one octet body (a plain frame or a request chunk) and answers an
acknowledgement or the submitted request, calling one module per stage, in order:
``stream`` (the body's head and what it alone rules out), ``registry`` (the job's groups;
it also expires, loses and reclaims them), ``payload`` (where a chunk's bytes go, received
there, into ``buffer``: the group's frame, hashed as it streams in), ``judge`` (the
decision of the pure state machine, ``machine``, through the rules in force, ``hooks``,
carried out on the group, ``groups``, and on its frame hash, ``frame_hash``), ``outcome``
(a chunk's answer: its progress, or the final chunk run once, or a replay answered) and
``decode`` (the whole frame decoded in place). ``shares`` splits server-wide budgets fairly
between accounts.

May import: ``fake_gs.engines``, ``fake_gs.answers``, ``fake_gs.controls``, the fake's tools
(``fake_gs.digest``, ``fake_gs.heap``) and ``contract``;
never ``fake_gs.http.app_state`` or ``fake_gs.http``.
"""
