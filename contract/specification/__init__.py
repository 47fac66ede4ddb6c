"""The published service specification as the kit reads it: sections, rules, terms.

``sections`` lists the spec's numbered sections and which clauses judge each;
``checkable_rules`` is every checkable rule of the spec in the kit's words, with what judges
it; ``clause_terms`` the key terms each ``spec §N`` clause rests on; ``index`` the derived
per-section index of terms (``spec_index.json`` beside it).

May import: ``contract`` only, like every part of it.
"""
