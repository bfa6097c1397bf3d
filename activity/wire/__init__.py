"""The wire: what crosses a socket, as pydantic models. ``acp`` holds the ACP messages the runner
forwards, ``frames`` the runner <-> server frames (``/ws/agent/``, its close codes and protocol
version), ``hostframes`` the host <-> server frames (``/ws/host/``). docs/protocol.md describes
every frame.

May import: pydantic and the standard library. Nothing of koruweb's, no Django: the runner,
which installs without Django, is built on it.
"""
