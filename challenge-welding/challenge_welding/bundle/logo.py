"""The competition logo: a small PNG drawn with matplotlib (no binary asset to keep in sync)."""

from __future__ import annotations

from pathlib import Path


def make_logo(path: str | Path, size_px: int = 256) -> Path:
    """Draw a weld bead between two plates with the three answers, write a square PNG."""
    # imported here: the Agg backend must be chosen before pyplot loads, and only `bundle` draws a logo
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.patches import Circle, Rectangle

    dpi = 100
    fig = plt.figure(figsize=(size_px / dpi, size_px / dpi), dpi=dpi)
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.axis("off")
    ax.add_patch(Rectangle((0, 0), 1, 1, color="#1f2a36"))
    ax.add_patch(Rectangle((0.06, 0.42), 0.88, 0.2, color="#8a96a3"))  # the plates
    x = np.linspace(0.08, 0.92, 200)
    ripple = 0.015 * np.sin(x * 90)  # the bead's ripples
    ax.fill_between(x, 0.49 + ripple, 0.55 + ripple, color="#e0a030")
    answers = ((0.2, "#2e9e5b", "OK"), (0.5, "#d0433a", "KO"), (0.8, "#6c7a89", "?"))
    for cx, colour, label in answers:
        ax.add_patch(Circle((cx, 0.2), 0.1, color=colour))
        ax.text(cx, 0.2, label, ha="center", va="center", color="white", fontsize=size_px / 20,
                fontweight="bold")
    ax.text(0.5, 0.82, "WELD\nTRUST", ha="center", va="center", color="white",
            fontsize=size_px / 14, fontweight="bold", linespacing=0.9)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, format="png")
    plt.close(fig)
    return path
