"""What the properties share to judge a server: checks, bodies, strategies, verdicts.

``verdict`` fails a property on a named clause; ``checks`` are judgements several properties
make (error envelopes, refusals); ``frames`` is an independent reading of DSSST1 frames;
``bodies`` and ``strategies`` are what properties send; ``large``, ``lifecycle``,
``semantic`` and ``variants`` hold the helpers of one family of properties each.

May import: ``contract``, ``client``, ``fake_gs``, ``conformance.drivers``.
"""
