"""The analyses section of the results page: chart markup and template data from details["analyses"].

No arithmetic: every number comes from details.json (scoring.analyses); this module picks
what to show and draws the charts (report.analyses_charts).
"""

from __future__ import annotations

from . import analyses_charts

def analyses_context(details: dict, chart) -> dict:
    """{"analyses": the block, "analyses_charts": markup}; ``chart`` is html's safe drawer.

    The section's metric-card rows come with details["metric_card"] (scoring.analyses.card).
    """
    a = details.get("analyses") or {}
    if not a:
        return {"analyses": {}, "analyses_charts": {}}
    return {"analyses": a, "analyses_charts": {
        "cost": chart("cost-coverage", analyses_charts.cost_coverage_chart, a.get("cost_coverage")),
        "breaking": chart("breaking points", analyses_charts.breaking_chart, a.get("breaking_points")),
        "drift": chart("drift timeline", analyses_charts.drift_timeline_chart, a.get("drift_delay")),
    }}
