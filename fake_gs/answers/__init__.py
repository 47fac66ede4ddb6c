"""What an answer of the fake looks like, whatever route gives it.

``check`` validates and renders every JSON answer against the contract's models;
``forms`` picks, per dialect and seed, which of the spec's allowed forms an answer takes,
and spells out each row: the status spelling of a job or a request (``job_state``,
``request_state``, from ``contract.forms`` and ``contract.states``), the id shapes, the
error bodies, and the store's outward form (``FormsOutward``); ``refusals`` turns a refusal into the error envelope;
``delivery`` says how a finished request's result reaches the client (inline, polled,
streamed); ``way_out`` is the one hook chain an answer leaves through (the running
variation's rewrites and answer-shape bends, then the forms).

May import: ``contract``, its own modules, and ``ops`` (below it: ``way_out`` reads the
variation's seams). Everything else in the fake sits above.
"""
