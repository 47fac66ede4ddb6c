"""The conformance suite: property-based checks of any Cortex Training server (and of the
kit's client) against the contract, reported per clause.

Its rooms, top to bottom (``.importlinter`` checks the order): ``cli`` (``gs-conformance``),
``selftest``, ``load/`` (``gs-load``) and ``parity/`` (``gs-parity``) run things;
``properties/`` holds the properties by area; ``fixtures`` and ``plugin`` wire them into
pytest (the options are declared once in ``options``; ``planner`` says before a run what
can be judged); ``judging/`` has the judgements properties share; ``jobs`` the jobs the
suite creates; ``drivers/`` reach the server (raw HTTP, the kit's client, a fault proxy);
``target`` is what the suite points at; ``inputs/`` what it sends; ``reporting/`` turns
outcomes into the clause report. Importing this package pulls neither torch nor the fake.
"""
