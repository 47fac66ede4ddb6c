"""The passive judge: every clause judgeable from observed traffic alone, on both sides.

``exchange`` is one observed exchange; ``requests`` judges the client's requests by the
rules the fake's gate enforces (its own rule functions); ``answers`` the server's answers
by the suite's answer clauses, with ``cursors`` for result pages and streams; ``passive``
runs them over a stream of exchanges (adding what only time shows) and gives a verdict per
clause and side; ``conclude`` judges at-most-once at the end; ``tally`` counts, in a form
that adds up across gs-load's processes; ``tape`` reads a recorded run as exchanges;
``report`` turns the verdicts into the suite's report.

Fed by gs-load's meter, gs-proxy (:mod:`conformance.proxy`) and ``gs-parity --judge``.
May import: ``contract``, ``fake_gs``'s pure rules (the chunk-group machine) and
``conformance.reporting``.
"""
