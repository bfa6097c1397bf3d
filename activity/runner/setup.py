"""What the runner reads from an agent's answers before the first turn: how to log in, its modes.

Agents describe both in shapes that differ from one agent and one release to the next, so this
reads the JSON they sent (the SDK's models dumped by alias), never a fixed list:

- **Authentication.** ``initialize`` lists ``authMethods``. A method of ``type: env_var`` names
  its variables; an older method names them only in its text ("Use OPENAI_API_KEY"). The runner
  picks the first method whose variables are all set in its environment.
- **Modes.** ``session/new`` may answer ``modes`` (set with ``session/set_mode``) and/or a
  ``configOptions`` select of category or id ``mode`` (set with ``session/set_config_option``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ENV_NAME = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_(?:API_KEY|KEY|TOKEN)\b")


@dataclass(frozen=True)
class AuthMethod:
    id: str
    name: str
    needs: tuple[str, ...]  # environment variables; empty: it needs a person (a login)

    def ready(self, env: Mapping[str, str]) -> bool:
        return bool(self.needs) and all(env.get(name) for name in self.needs)

    def describe(self) -> str:
        needs = " and ".join(self.needs) if self.needs else "an interactive login"
        return f"{self.id} ({self.name}: needs {needs})"


def auth_methods(init: Mapping[str, Any]) -> list[AuthMethod]:
    methods = init.get("authMethods")
    found: list[AuthMethod] = []
    for method in methods if isinstance(methods, list) else []:
        if not isinstance(method, dict) or not isinstance(method.get("id"), str):
            continue
        listed = method.get("vars")
        if isinstance(listed, list):
            names = [v.get("name") for v in listed if isinstance(v, dict)]
            needs = tuple(n for n in names if isinstance(n, str))
        else:
            text = f"{method.get('name') or ''} {method.get('description') or ''}"
            needs = tuple(dict.fromkeys(ENV_NAME.findall(text)))
        found.append(AuthMethod(method["id"], str(method.get("name") or method["id"]), needs))
    return found


def pick(methods: list[AuthMethod], env: Mapping[str, str]) -> AuthMethod | None:
    return next((method for method in methods if method.ready(env)), None)


def no_credentials(methods: list[AuthMethod]) -> str:
    listed = "; ".join(method.describe() for method in methods) or "none advertised"
    return f"the agent asks to authenticate and no method's credentials are set: {listed}"


@dataclass(frozen=True)
class Modes:
    ids: tuple[str, ...]
    names: tuple[str, ...]
    config_id: str | None  # set through this config option, else through session/set_mode
    current: str | None = None
    descriptions: tuple[str, ...] = field(default=(), compare=False)

    def said(self) -> tuple[str, ...]:
        """Each mode's description (empty if it has none)."""
        return (self.descriptions + ("",) * len(self.ids))[: len(self.ids)]

    def describe(self) -> str:
        return ", ".join(
            f"{mode} ({name})" if name and name != mode else mode
            for mode, name in zip(self.ids, self.names, strict=True)
        )


def modes(session: Mapping[str, Any]) -> Modes:
    """The modes a ``session/new`` answer offers, and how to switch between them."""
    for option in _list(session.get("configOptions")):
        if option.get("type", "select") != "select" or not isinstance(option.get("id"), str):
            continue
        if option.get("category") == "mode" or option["id"] == "mode":
            listed = _flat(option.get("options"))
            return _modes(listed, "value", option["id"], option.get("currentValue"))
    state = session.get("modes")
    state = state if isinstance(state, dict) else {}
    return _modes(_list(state.get("availableModes")), "id", None, state.get("currentModeId"))


def _modes(listed: list[dict[str, Any]], key: str, config_id: str | None, current: Any) -> Modes:
    kept = [m for m in listed if isinstance(m.get(key), str)]
    ids = tuple(m[key] for m in kept)
    names = tuple(str(m.get("name") or m[key]) for m in kept)
    said = tuple(m["description"] if isinstance(m.get("description"), str) else "" for m in kept)
    return Modes(ids, names, config_id, current if isinstance(current, str) else None, said)


def usage(result: Mapping[str, Any]) -> dict[str, Any] | None:
    """A turn's token counts: the prompt answer's ``usage``, else what gemini-cli puts in its
    ``_meta.quota.token_count`` (``input_tokens``/``output_tokens``)."""
    if isinstance(result.get("usage"), dict):
        return dict(result["usage"])
    meta = result.get("_meta")
    quota = meta.get("quota") if isinstance(meta, dict) else None
    counts = quota.get("token_count") if isinstance(quota, dict) else None
    if not isinstance(counts, dict):
        return None
    found = {
        "inputTokens": counts.get("input_tokens"),
        "outputTokens": counts.get("output_tokens"),
    }
    found = {key: n for key, n in found.items() if isinstance(n, int) and not isinstance(n, bool)}
    if not found:
        return None
    return {**found, "totalTokens": sum(found.values())}


def _list(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _flat(options: Any) -> list[dict[str, Any]]:
    """A select's options, which may come in groups (``{"group", "name", "options"}``)."""
    flat: list[dict[str, Any]] = []
    for option in _list(options):
        flat += _list(option["options"]) if "options" in option else [option]
    return flat
