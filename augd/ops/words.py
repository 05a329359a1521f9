"""How ops write numbers for people (Op.describe, the lines `augd preview` writes under a tile). Plain
strings, no imports: the preview writes its own sizes with the same helper, so the two never disagree."""
from __future__ import annotations

__all__ = ["plural", "signed", "size"]


def plural(n: int, noun: str) -> str:
    """`1 tile`, `2 tiles`, `0 ops`: a count with its noun as a person writes it."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def size(hw) -> str:
    """(height, width) as `W×H`: width first, as image sizes are usually written."""
    return f"{round(hw[1])}×{round(hw[0])}"


def signed(v: float, digits: int) -> str:
    """+1.5, -0.25, and +0.0 rather than -0.0 for what rounds to zero."""
    return f"{round(v, digits) + 0.0:+.{digits}f}"
