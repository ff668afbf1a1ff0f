"""Numbers from a run, named for the prose (MyST-NB's glue), also where MyST-NB is absent."""
from __future__ import annotations

from typing import Any


def glue(name: str, value: Any, display: bool = False) -> None:
    """Store `value` under `name`, so the book's text can insert it: {glue:text}`name`.

    On Colab or Kaggle, without MyST-NB installed, this does nothing visible.
    """
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        return
    myst_glue(name, value, display=display)
