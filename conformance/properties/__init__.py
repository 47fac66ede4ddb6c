"""The conformance properties, one module per contract area.

Run them with ``gs-conformance``, ``pytest --pyargs conformance.properties`` or by path;
each test names the clauses it checks with ``contract.clauses.checks``.
"""
