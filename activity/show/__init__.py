"""How things look to a person, for pages and pushes alike: ``statuses`` (what a status says and
its tone), ``diffs``, ``highlight``, ``terminal`` and ``markdown`` (an agent's text as safe
HTML), ``contrast`` (the colour checks), ``timing``, ``timeline`` and ``timeline_reads`` (how
long things took), ``dom`` (every DOM id).

May import: ``activity.models``, ``activity.core``.
"""
