"""What an answer of the fake looks like, whatever route gives it.

``check`` validates and renders every JSON answer against the contract's models;
``forms`` picks, per dialect, which of the spec's allowed forms an answer takes (the
status spelling of a job or request lives there, read from ``contract.forms`` and
``contract.states``); ``forms_any`` holds the rows only ``--dialect any`` uses;
``refusals`` turns a refusal into the error envelope; ``delivery`` says how a finished
request's result reaches the client (inline, polled, streamed).

May import: ``contract`` only (and its own modules). Everything else in the fake sits above.
"""
