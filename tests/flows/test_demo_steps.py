"""The demo's resume logic: a step is reused only with the same parameters; a change redoes it
and every later step."""

from challenge_welding.flows.demo import STEPS, Steps


def test_markers_reuse_and_invalidate(tmp_path):
    steps = Steps(tmp_path)
    quick = {"seed": 0, "n": 600}
    for name in STEPS:
        assert not steps.done(name, quick)
        steps.mark(name, quick)
    assert all(steps.done(name, quick) for name in STEPS)  # a re-run reuses everything
    default = {"seed": 0, "n": 2000}
    assert not steps.done("build-sets", default)  # changed size: redo build-sets ...
    assert steps.done("synth", quick)             # ... but not the steps before it
    for later in ("train", "evaluate", "leaderboard"):
        assert not (tmp_path / ".steps" / f"{later}.json").exists()
