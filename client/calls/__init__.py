"""One call of the client on the wire: the session, its retries, its reads, its uploads.

``session`` is the HTTP session with the contract's retry policy, deadlines and typed errors
(the retry decision lives there); ``backoff`` is the one wait between tries;
``answer_reading`` reads one answer under the size cap into JSON or a typed error;
``bounded_read`` bounds every read in bytes and time (on urllib3's hooks:
``urllib3_pools``); ``upload`` sends octet frames as
request chunks (spec §9.3); ``polling`` waits on asynchronous requests and jobs.

May import: ``contract`` and ``client.errors``/``client.config``; the REST and RL clients
above it (``client.rest``, ``client.rl``) call it, never the other way round.
"""
