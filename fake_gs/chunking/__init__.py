"""Request chunk groups (spec §9.3, §6.1): how a frame sent in chunks becomes whole.

``intake`` takes one octet body (a plain frame or a request chunk) and answers an
acknowledgement or the submitted request; ``stream`` reads the body as it arrives, into
where its bytes stay; ``machine`` is the protocol as one pure state machine (the restart
rule lives there); ``hooks`` is where the rules of the running fake change it, by name; ``groups`` keeps one
group's chunks per job; ``buffer`` is where a group's frame lands as bytes arrive;
``registry`` finds, expires and loses groups; ``digest`` hashes bytes as they arrive;
``shares`` splits server-wide budgets fairly between accounts.

May import: ``fake_gs.engines``, ``fake_gs.answers.check``, ``fake_gs.ops`` and ``contract``;
never ``fake_gs.http.app_state`` or ``fake_gs.http``.
"""
