"""The detailed results page (stub until the report lands)."""

import html as _html
import json


def render_report(details: dict, frames: dict, config) -> str:
    body = _html.escape(json.dumps(details.get("scores", {}), indent=1))
    return f"<!doctype html><html><body><pre>{body}</pre></body></html>"
