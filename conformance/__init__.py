"""The conformance suite: property-based checks of any Cortex Training server (and of the
kit's client) against the contract, reported per clause.

``conformance.plugin`` is the pytest plugin (its options are declared once in
``conformance.options``, its fixtures live in ``conformance.fixtures``, the per-clause
booking in ``conformance.reporting.booking``), ``conformance.properties`` holds the properties,
``conformance.cli`` the ``gs-conformance`` command. Importing this package pulls neither torch nor the fake server.
"""
