"""``--shape M=512,N=768,K=3072``: the shape of a parametric environment id on the command line."""

from __future__ import annotations

from tensorgym.errors import InvalidArgumentError


def parse_shape(text: str | None) -> dict[str, int | str]:
    """``"M=512,N=768,K=3072"`` -> ``{"M": 512, "N": 768, "K": 3072}`` (values that are not integers,
    such as ``padding=same``, stay strings); None or ``""`` -> ``{}``."""
    shape: dict[str, int | str] = {}
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise InvalidArgumentError(
                f"a shape is comma-separated NAME=VALUE pairs, e.g. M=512,N=768,K=3072; got {text!r}")
        value = value.strip()
        shape[key.strip()] = int(value) if value.lstrip("-").isdigit() else value
    return shape
