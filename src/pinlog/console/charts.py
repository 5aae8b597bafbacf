"""Charts of the operator console as inline SVG (no script, no library, works offline).

:func:`per_minute_svg` draws the completed-per-minute bars of the last hour (failures stacked
on top in another colour); every number in it is ours, every label escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

WIDTH, HEIGHT, PAD = 600, 140, 24


def per_minute_svg(per_minute: Sequence[dict[str, Any]]) -> str:
    """An SVG bar chart of ``per_minute`` (``[{"minutes_ago", "completed", "failed"}]``, index 0
    = now), oldest minute on the left. Has a ``<title>`` and an ``aria-label`` that say the totals
    (screen readers), and a ``<title>`` per bar (hover)."""
    minutes = list(reversed(per_minute))
    n = max(1, len(minutes))
    peak = max([m["completed"] + m["failed"] for m in minutes] + [1])
    bar = (WIDTH - 2 * PAD) / n
    plot = HEIGHT - 2 * PAD
    completed = sum(m["completed"] for m in minutes)
    failed = sum(m["failed"] for m in minutes)
    label = f"{completed} contexts completed and {failed} stages failed in the last {n} minutes"
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
             f'role="img" aria-label="{escape(label)}" class="chart">',
             f"<title>{escape(label)}</title>",
             f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" '
             'class="axis"/>']
    for i, m in enumerate(minutes):
        x = PAD + i * bar
        h_ok = plot * m["completed"] / peak
        h_fail = plot * m["failed"] / peak
        tip = f'{m["minutes_ago"]} min ago: {m["completed"]} completed, {m["failed"]} failed'
        parts.append(f"<g><title>{escape(tip)}</title>")
        if h_ok:
            parts.append(f'<rect x="{x:.1f}" y="{HEIGHT - PAD - h_ok:.1f}" width="{max(bar - 1, 1):.1f}" '
                         f'height="{h_ok:.1f}" class="ok"/>')
        if h_fail:
            parts.append(f'<rect x="{x:.1f}" y="{HEIGHT - PAD - h_ok - h_fail:.1f}" '
                         f'width="{max(bar - 1, 1):.1f}" height="{h_fail:.1f}" class="fail"/>')
        parts.append("</g>")
    parts.append(f'<text x="{PAD}" y="{HEIGHT - 6}" class="tick">-{n} min</text>')
    parts.append(f'<text x="{WIDTH - PAD}" y="{HEIGHT - 6}" class="tick" text-anchor="end">now</text>')
    parts.append(f'<text x="{PAD}" y="{PAD - 8}" class="tick">peak {peak}/min</text>')
    parts.append("</svg>")
    return "".join(parts)
