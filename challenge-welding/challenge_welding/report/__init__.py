"""The pages: the detailed results page of one scoring (``html``) and the leaderboard page (``leaderboard``).

Owns the drawing only: it renders details.json (every number, interval and chart's reduced
data already computed by scoring) and the config it is given; it computes nothing and reads
no file but its templates. It may import contract only (tests/test_layers.py).
Modules: html.py (the results page) with charts.py (its charts, inline SVG), analyses_view.py
and analyses_charts.py (the analyses section's markup and charts).
"""
