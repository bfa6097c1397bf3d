"""People and what they may do: ``access`` (who may see and answer what), ``login`` (the login
page and its limits), ``limits`` (counts every process shares: wrong passwords, comments per
minute), ``invites`` (joining a workspace by a one-time link) and ``workspaces``
(members, roles, the last admin kept, deleting a run).

May import: ``activity.models``, ``activity.core``.
"""
