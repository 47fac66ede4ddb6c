"""From test outcomes to a clause report: violations, booking, verdicts, rendering.

``violations`` is how a property fails on a named clause; ``recorder`` keeps the last
exchanges of the running test; ``booking`` turns pytest reports into per-clause results;
``verdicts`` reduces them to one verdict per clause; ``render`` writes the report
(terminal, Markdown, HTML, JUnit), with ``summary`` under it: a clause reaches the HTML
report through ``booking``, then ``verdicts``, then ``render``. ``cost`` is what a run
cost the target, ``progress`` how far it is.

May import: ``contract``, ``client`` (bounded reads) and ``conformance.runtime``; it is
the suite's floor.
"""
