"""gs-proxy: a validating reverse proxy between any client and any server.

``relay`` forwards each exchange unchanged (asyncio streams, h11) and hands it to the
passive judge (:mod:`conformance.judge`); ``cli`` is the ``gs-proxy`` command: live
violation lines, an optional tape, the report at the end.

May import: ``conformance.judge``, ``conformance.reporting``, ``contract`` and
``fake_gs.tls`` (the throwaway CA of ``--tls``).
"""
