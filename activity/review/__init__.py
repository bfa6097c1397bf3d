"""Reading runs: ``reads`` (what a chat page and its pushes show, in a fixed number of queries),
``filters`` (a run's calls by status, kind and text), ``runs`` (the runs list), ``search``
(words → hits), ``snippets`` and ``grouped`` (the search page), ``transcript`` (a turn as it
happened), ``mentions`` (comments and @mentions), ``saved`` (saved views), ``reviews`` (a
run's review) and ``shares`` (read-only links to a run).

May import: ``activity.live``, ``activity.people``, ``activity.show`` and the parts below them.
"""
