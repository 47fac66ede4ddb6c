"""The fake's HTTP side: from the ASGI app down to the handler of one route.

``app`` builds the Starlette app (and seeds the OpenAPI examples' resources,
``example_data``); ``connections`` caps and times connections below it (the h11 and uvicorn
internals its body bypass reads are fenced in ``h11_internals``); ``middleware``
adds the request id and the log line; ``routing`` turns ``contract.routes`` into routes;
``dispatch`` is the wrapper every service route passes (auth, faults, refusals);
``body`` reads request bodies as they arrive (an octet body goes on to
``fake_gs.chunking.intake``); ``auth`` maps tokens to
accounts; ``idempotency`` answers a repeated ``Idempotency-Key``; ``admin`` serves
``/_fake/``; ``recording`` writes what arrives to a parity tape; ``app_state`` is what one running fake holds; ``handlers/`` has one module
per group of routes.

May import: ``fake_gs.http.app_state``, ``fake_gs.chunking``, ``fake_gs.engines``,
``fake_gs.answers.check``, ``fake_gs.controls`` and ``contract``; nothing below imports it
(import-linter's layers contract for the fake, ``.importlinter``).
"""
