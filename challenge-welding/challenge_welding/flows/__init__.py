"""flows: whole pipelines run end to end (build, evaluate, score, leaderboard, demo, rehearse); may import every layer below."""
