"""From test outcomes to a clause report: planning, booking, verdicts, rendering.

``planner`` says before a run which clauses can be judged; ``recorder`` keeps the last
exchanges of the running test; ``booking`` turns pytest reports into per-clause results;
``verdicts`` reduces them to one verdict per clause; ``render`` writes the report (terminal,
Markdown, HTML, JUnit): a clause reaches the HTML report through ``booking`` then
``render``; ``cost`` and ``progress`` are what a run cost and how far it is.

May import: ``contract`` (and ``client`` for bounded reads); nothing else of the suite.
"""
