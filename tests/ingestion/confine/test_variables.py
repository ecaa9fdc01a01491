"""The environment of participant code is an explicit list (confine/variables.py): no variable
of the caller's reaches it but the GPU's selection; the evaluator's installer keeps the proxy
and CA settings it needs to reach the index, and still no secret."""

from challenge_welding.ingestion.confine import variables

SECRET = "cw-secret-7f3a9c"


def test_participant_environment_is_the_documented_list(tmp_path, monkeypatch):
    monkeypatch.setenv("SECRET_TOKEN", SECRET)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    env = variables.participant_env(tmp_path / "home", tmp_path / "home" / "tmp")
    assert env["HOME"] == str(tmp_path / "home") and env["TMPDIR"] == str(tmp_path / "home" / "tmp")
    assert env["CUDA_VISIBLE_DEVICES"] == "1"
    assert env["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert "SECRET_TOKEN" not in env and "HTTPS_PROXY" not in env
    assert set(env) <= set(variables.PARTICIPANT_ENV) | set(variables.PARTICIPANT_ENV_PASS)
    # the evaluator's own uv (no participant code) keeps the proxy and CA settings, no secret
    tool = variables.installer_env(tmp_path / "tmp")
    assert tool["HTTPS_PROXY"] == "http://proxy.invalid:3128" and "SECRET_TOKEN" not in tool
