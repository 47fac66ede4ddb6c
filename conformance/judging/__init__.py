"""What the properties share to judge a server: checks and the helpers of whole families.

``checks`` are judgements several properties make (error envelopes, refusals, statuses);
``frames`` is an independent reading of DSSST1 frames, to judge a server's bytes;
``large``, ``lifecycle``, ``semantic`` and ``variants`` hold the helpers of one family of
properties each; ``at_most_once`` measures the kit's client through a fault proxy.
A failing judgement names its clause through ``conformance.reporting.violations``.

May import: ``conformance.jobs``, ``conformance.drivers`` and everything below them
(import-linter's layers contract for the suite, ``.importlinter``).
"""
