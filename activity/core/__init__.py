"""The pure core: the ToolActivity contract (``contract``), one call's merge (``callstate``,
``merge``, ``render``, ``prompts``, ``exits``), masking secrets (``masking`` and ``masks/``), the
channel-layer group names (``groups``) and the one refusal a person reads (``refusals``).
No I/O, no clock, no database: functions of their arguments, tested with generated input.

May import: ``activity.wire``. Never Django or anything above it
(docs/architecture.md#parts-and-their-import-rules).
"""
