"""Properties of the server as a whole: concurrency, hardening, strict mode, idempotency,
the proposed profile, semantic checks, the stateful machine and schemathesis."""
