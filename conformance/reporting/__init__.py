"""From test outcomes to a clause report: violations, booking, verdicts, rendering.

``violations`` is how a property fails on a named clause; ``recorder`` keeps the last
exchanges of the running test; ``booking`` turns pytest reports into per-clause results;
``verdicts`` reduces them to one verdict per clause; ``render`` writes the report
(terminal, Markdown, HTML, JUnit), with ``summary`` under it: a clause reaches the HTML
report through ``booking``, then ``verdicts``, then ``render``. ``cost`` is what a run
cost the target, ``progress`` how far it is.

For every tool of the kit (the suite, gs-parity, gs-load): ``model`` is the one model of a
verdict (failures first, root causes, decided results), ``formats`` holds one writer per
output format, and ``clean`` makes strings from a server or a tape safe to show (control
bytes, escaping, credentials scrubbed before any cut).

May import: ``contract``, ``client`` (bounded reads) and ``conformance.runtime``; it is
the suite's floor.
"""
