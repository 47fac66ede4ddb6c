"""The conformance suite: property-based checks of any Cortex Training server (and of the
kit's client) against the contract, reported per clause.

``conformance.plugin`` is the pytest plugin (options, fixtures, per-clause recording),
``conformance.properties`` holds the properties, ``conformance.cli`` the ``gs-conformance``
command. Importing this package pulls neither torch nor the fake server.
"""
