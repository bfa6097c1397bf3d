"""Render what an agent sent into the text a person reads: pure functions, no I/O.

These produce ``agent_input`` (the command line, the paths, an MCP call's arguments) and
``agent_output`` (text, a unified diff, terminal output, or the raw result) before bounding.
"""

from __future__ import annotations

import difflib
import json
import shlex
from collections.abc import Iterable
from typing import Any

from activity.core.masking import mask, mask_junction
from activity.wire.acp import ContentBlock, Location, ToolCallContent

PATH_KEYS = ("file_path", "path", "notebook_path", "abs_path", "source", "destination")
PATH_KINDS = frozenset({"read", "edit", "delete", "move"})


def as_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def is_empty_input(raw: Any) -> bool:
    return raw is None or raw == {} or raw == [] or raw == ""


def command_line(command: Any) -> str | None:
    if isinstance(command, str) and command.strip():
        return command
    if isinstance(command, list) and command and all(isinstance(p, str) for p in command):
        return shlex.join(command)
    return None


def render_input(raw: Any, kind: str | None) -> str:
    """What the agent asked the tool to do, for a person."""
    if isinstance(raw, str):
        return raw
    if not isinstance(raw, dict):
        return as_json(raw)
    command = command_line(raw.get("command", raw.get("cmd")))
    if command is not None:
        return command
    paths = [raw[key] for key in PATH_KEYS if isinstance(raw.get(key), str) and raw[key]]
    if isinstance(raw.get("paths"), list):
        paths += [p for p in raw["paths"] if isinstance(p, str) and p]
    if paths and kind in PATH_KINDS:
        return "\n".join(paths)
    return "\n".join(f"{key}: {_scalar(value)}" for key, value in raw.items())


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def render_locations(locations: Iterable[Location]) -> str:
    return "\n".join(
        loc.path if loc.line is None else f"{loc.path}:{loc.line}" for loc in locations
    )


def render_block(block: ContentBlock) -> str:
    match block.type:
        case "text":
            return block.text or ""
        case "resource_link":
            return f"{block.title or block.name or 'link'} <{block.uri or ''}>"
        case "resource":
            resource = block.resource or {}
            text = resource.get("text")
            return text if isinstance(text, str) else f"[resource <{resource.get('uri', '')}>]"
        case "image" | "audio":
            return f"[{block.type}{': ' + block.mime_type if block.mime_type else ''}]"
        case other:
            return block.text if block.text is not None else f"[{other}]"


def unified_diff(path: str | None, old: str | None, new: str | None) -> str:
    name = path or "file"
    lines = difflib.unified_diff(
        (old or "").splitlines(),
        (new or "").splitlines(),
        fromfile="/dev/null" if old is None else f"a/{name.lstrip('/')}",
        tofile=f"b/{name.lstrip('/')}",
        lineterm="",
    )
    return "\n".join(lines)


def render_content_item(item: ToolCallContent) -> str:
    match item.type:
        case "content":
            return render_block(item.content) if item.content else ""
        case "diff":
            return unified_diff(item.path, item.old_text, item.new_text)
        case "terminal":
            return f"[terminal {item.terminal_id or ''}]".replace(" ]", "]")
        case other:
            return f"[{other} content]"


# What of the text before a block is passed to ``mask_junction`` with it: enough for a masked
# token it ends with (``secrets.mask_junction`` looks 200 characters back), little enough that
# an output of many blocks is joined in linear time.
SEAM_CHARS = 256


def render_content(items: Iterable[ToolCallContent]) -> str:
    """The blocks' texts, one a line, with a secret split between blocks masked (issue 22).

    Each string was masked alone at the boundary (``activity/live/boundary.py``), so a key split
    across two blocks would show the half that alone looks like nothing. The blocks are masked
    together, as a reply's chunks are: first all of them joined without a separator (a secret
    whole across blocks, a private key's block), then each with the text before it
    (``mask_junction``: a token the boundary masked, continued in the next block). Masks keep
    byte sizes, so ``result_bytes`` stays the size of what the agent sent.
    """
    texts = [text for text in map(render_content_item, items) if text]
    return "\n".join(_masked_across(texts) if len(texts) > 1 else texts)


def _masked_across(texts: list[str]) -> list[str]:
    sizes = [len(text.encode("utf-8", "surrogatepass")) for text in texts]
    joined = "".join(texts)
    masked = mask(joined)
    if masked != joined:  # split back by bytes: masks keep them, so no character is cut
        raw, at, texts = masked.encode("utf-8", "surrogatepass"), 0, []
        for size in sizes:
            texts.append(raw[at : at + size].decode("utf-8", "surrogatepass"))
            at += size
    seamed = texts[:1]
    before = texts[0][-SEAM_CHARS:]
    for text in texts[1:]:
        if before.endswith("*"):  # a mask's stars (secrets.py): a token that may continue
            _, text = mask_junction(before, text)
        seamed.append(text)
        before = (before + text)[-SEAM_CHARS:]
    return seamed


# Where agents put a command's output in ``rawOutput`` (codex-acp: ``aggregated_output`` is stdout
# and stderr as the terminal showed them, ``formatted_output`` what the model was told).
OUTPUT_KEYS = ("aggregated_output", "formatted_output", "output")


def render_raw(raw: Any) -> str:
    """``rawOutput`` for a person: a command's output where the agent says which it is,
    else the value itself (JSON for a structure)."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, dict):
        for key in OUTPUT_KEYS:
            if isinstance(raw.get(key), str) and raw[key]:
                return str(raw[key])
        streams = [raw.get(name) for name in ("stdout", "stderr")]
        if any(isinstance(text, str) and text for text in streams):
            return "".join(text for text in streams if isinstance(text, str))
    return as_json(raw)
