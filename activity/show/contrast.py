"""Colour arithmetic for the checks that keep text readable: WCAG 2.2 contrast ratios, the
``color-mix(in srgb, …)`` tints the stylesheets build from the colour properties, and the
properties themselves as ``koruweb.css`` defines them for the light and the dark scheme.

Pure functions, no I/O: the tests read the stylesheets and hand their text in.
"""

from __future__ import annotations

import re

RGB = tuple[float, float, float]

AA_TEXT = 4.5  # WCAG 1.4.3: normal text
AA_LARGE = 3.0  # WCAG 1.4.3 large text, 1.4.11 non-text contrast


def parse_hex(colour: str) -> RGB:
    """``#rgb`` or ``#rrggbb`` as sRGB components in 0–255."""
    digits = colour.strip().lstrip("#")
    if len(digits) == 3:
        digits = "".join(c * 2 for c in digits)
    if len(digits) != 6 or not re.fullmatch(r"[0-9a-fA-F]{6}", digits):
        raise ValueError(f"not a hex colour: {colour!r}")
    return (int(digits[0:2], 16), int(digits[2:4], 16), int(digits[4:6], 16))


def _linear(channel: float) -> float:
    c = channel / 255
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def luminance(rgb: RGB) -> float:
    """WCAG relative luminance."""
    r, g, b = (_linear(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def ratio(a: RGB | str, b: RGB | str) -> float:
    """The WCAG contrast ratio of two colours, 1 to 21."""
    la, lb = (luminance(parse_hex(c) if isinstance(c, str) else c) for c in (a, b))
    hi, lo = max(la, lb), min(la, lb)
    return (hi + 0.05) / (lo + 0.05)


def mix(a: RGB | str, share: float, b: RGB | str) -> RGB:
    """``color-mix(in srgb, a share, b)``: ``share`` (0–1) of ``a``, the rest ``b``."""
    ca = parse_hex(a) if isinstance(a, str) else a
    cb = parse_hex(b) if isinstance(b, str) else b
    mixed = (share * x + (1 - share) * y for x, y in zip(ca, cb, strict=True))
    return tuple(round(c) for c in mixed)  # type: ignore[return-value]


def _lab(rgb: RGB) -> RGB:
    r, g, b = (_linear(c) for c in rgb)
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 216 / 24389 else (24389 / 27 * t + 16) / 116

    fx, fy, fz = f(x), f(y), f(z)
    return (116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz))


def difference(a: RGB | str, b: RGB | str) -> float:
    """How far apart two colours look (CIE76 ΔE in Lab): about 2 is just noticeable, 10+
    is plain at a glance, whatever the two colours' luminance contrast."""
    la, lb = (_lab(parse_hex(c) if isinstance(c, str) else c) for c in (a, b))
    return float(sum((x - y) ** 2 for x, y in zip(la, lb, strict=True)) ** 0.5)


PROPERTY = re.compile(r"--([\w-]+)\s*:\s*([^;{}]+?)\s*(?:;|\}|$)", re.M)
DARK = re.compile(r"@media\s*\(prefers-color-scheme:\s*dark\)\s*\{(.*?)\}\s*\}", re.S)
HEX = re.compile(r"#[0-9a-fA-F]{3}(?:[0-9a-fA-F]{3})?")
VAR = re.compile(r"var\(--([\w-]+)\)")
MIX = re.compile(r"color-mix\(in srgb,\s*(\S+)\s+([\d.]+)%,\s*(\S+?)\)")


def properties(*sheets: str) -> dict[str, dict[str, str]]:
    """The colour properties of ``sheets`` (read in order) for each scheme, resolved to hex:
    ``{"light": {"fg": "#1d2430", ...}, "dark": {...}}``.

    A value may be a hex colour, ``var(--other)``, or ``color-mix(in srgb, A n%, B)`` of those.
    Light is every declaration outside a ``prefers-color-scheme: dark`` media query; dark is
    light overridden by those inside one. Properties of other kinds are left out."""
    light: dict[str, str] = {}
    dark_only: dict[str, str] = {}
    for css in sheets:
        for block in DARK.findall(css):
            dark_only.update(PROPERTY.findall(block))
        light.update(PROPERTY.findall(DARK.sub("", css)))
    schemes = {"light": light, "dark": {**light, **dark_only}}
    return {name: _resolved(raw) for name, raw in schemes.items()}


def _resolved(raw: dict[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}

    def value(text: str, depth: int = 0) -> str | None:
        text = text.strip()
        if depth > 10:
            return None
        if HEX.fullmatch(text):
            return "#{:02x}{:02x}{:02x}".format(*parse_hex(text))
        if m := VAR.fullmatch(text):
            return value(raw[m.group(1)], depth + 1) if m.group(1) in raw else None
        if m := MIX.fullmatch(text):
            a, b = value(m.group(1), depth + 1), value(m.group(3), depth + 1)
            if a is None or b is None:
                return None
            return "#{:02x}{:02x}{:02x}".format(*mix(a, float(m.group(2)) / 100, b))
        return None

    for name, text in raw.items():
        resolved = value(text)
        if resolved is not None:
            out[name] = resolved
    return out
