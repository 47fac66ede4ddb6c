"""What a load run measures: each exchange, the tallies, and the clauses judged on them.

``meter`` times every try of every call; ``exchange`` is one of them; ``tally`` adds up
across processes; ``checks`` judges each exchange by its clause; ``delivery`` follows
cursors and streams; ``conclude`` judges at most once when the users have stopped.

May import: ``contract``, ``client`` and ``conformance.load``'s options and profile.
"""
