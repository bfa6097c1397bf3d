"""Pushes to open pages: ``watching`` (who has a page of a chat open, in every process),
``pushes`` (the fragments that bring a page from one version to another), ``broadcast`` (render
once, send to every viewer, coalesce bursts) and ``inbox`` (what waits for a person: the count
on every page, the runs list's lines).

May import: ``activity.review`` and the parts below it; never the web views or the sockets.
"""
