"""Checkable exercises: compare a reader's answer with what a real run produced."""
from __future__ import annotations

from typing import Any

import torch


def _same(answer: Any, actual: Any, tol: float) -> bool:
    try:
        a, b = torch.as_tensor(answer, dtype=torch.float64), torch.as_tensor(actual, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        return answer == actual
    if a.numel() == 1 and b.numel() == 1:  # 6 is a fine answer for tensor([6.])
        a, b = a.flatten(), b.flatten()
    return a.shape == b.shape and torch.allclose(a, b, rtol=tol, atol=tol)


def check(answer: Any, actual: Any, tol: float = 1e-6) -> None:
    """Print whether `answer` matches `actual` (numbers, lists or tensors, within `tol`).

    `actual` comes from a run in the same cell; it is not printed, so the check
    does not give the answer away. `answer` None means "not answered yet".
    """
    if answer is None:
        print("No answer yet: replace None with your answer and run this cell again.")
    elif _same(answer, actual, tol):
        print("Right: that is what the ranks computed.")
    else:
        print(f"Not yet: the ranks computed something other than {answer!r}. Try again, or open the solution.")
