"""How the suite reaches a server: raw HTTP, the kit's client, and a proxy between.

``raw`` builds requests from ``contract.routes`` and keeps answers whole (as
``raw_answers``); ``kit_client`` runs the same ops through the kit's client; ``ops`` is the
one op surface over both; ``rawhttp`` speaks HTTP/1.1 by hand for calls no library makes;
``tamper`` rewrites answers on their way into the client; ``faultproxy`` loses, cuts and
delays exchanges between a client and a server.

May import: ``contract``, ``client``, ``fake_gs``, ``conformance.target``,
``conformance.inputs`` and ``conformance.reporting``.
"""
