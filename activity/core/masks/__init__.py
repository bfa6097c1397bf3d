"""The shapes of secret ``activity/core/masking.py`` masks, one module per kind: ``spans`` (what
they share), ``tokens``, ``keys`` (key/value forms) and ``encoded``. Each shape is a function
from a text to the spans of it to mask, in time linear in the text; these modules import nothing
of koruweb but each other (docs/secrets.md)."""
