"""Secrets scrubbed from everything the agent stage writes: by value (the environment's
secret-named variables, the config's secret fields) and by key (a config's api_key)."""

from __future__ import annotations

import json

from harness.agents.scrubbing import Scrubber

KEY = "sk-test-planted-0123456789abcdef"
ENVIRON = {"OPENAI_API_KEY": KEY, "MSWEA_MODEL_API_KEY": KEY, "ANTHROPIC_API_KEY": "sk-ant-another-secret-value",
           "GITHUB_TOKEN": "ghp_tokenvalue123456", "HOME": "/root", "PATH": "/usr/bin:/bin",
           "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt", "SHORT_KEY": "abc",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "RAY_AUTH_MODE": "token-auth-mode"}


def test_secret_values_are_replaced_wherever_they_occur_and_named_never_shown():
    scrubber = Scrubber.from_environment(ENVIRON)
    text = f"Authorization: Bearer {KEY}; retry with sk-ant-another-secret-value and ghp_tokenvalue123456"
    scrubbed = scrubber.text(text)
    assert KEY not in scrubbed and "sk-ant-another" not in scrubbed and "ghp_" not in scrubbed
    # one value held by two variables is named by the first (OPENAI_API_KEY, MSWEA_MODEL_API_KEY)
    assert "[REDACTED:" in scrubbed and scrubber.found_in(text) == ["ANTHROPIC_API_KEY", "GITHUB_TOKEN",
                                                                     "OPENAI_API_KEY"]
    assert KEY not in json.dumps(scrubber.names)


def test_paths_switches_and_short_values_are_not_secrets():
    scrubber = Scrubber.from_environment(ENVIRON)
    for harmless in ("/root", "/usr/bin:/bin", "/etc/ssl/certs/ca-certificates.crt", "abc", "True",
                     "token-auth-mode"):
        assert scrubber.text(f"x {harmless} y") == f"x {harmless} y"


def test_nested_data_is_scrubbed_keys_and_values():
    scrubber = Scrubber.from_environment(ENVIRON)
    data = {"messages": [{"role": "user", "content": f"key={KEY}"}], KEY: 1, "n": 3, "ok": None}
    out = scrubber.data(data)
    assert KEY not in json.dumps(out) and out["n"] == 3 and out["ok"] is None


def test_a_secret_named_config_field_is_redacted_whatever_its_value():
    config = {"model": {"model_name": "openai/gpt-4o-mini",
                        "model_kwargs": {"api_key": "short", "api_base": "http://127.0.0.1:1/v1", "temperature": 0,
                                         "extra_headers": {"Authorization": "Bearer config-only-secret-123"}}}}
    scrubber = Scrubber.from_environment({}, config)
    out = scrubber.scrub_config(config)
    kwargs = out["model"]["model_kwargs"]
    assert kwargs["api_key"] == "[REDACTED]" and kwargs["extra_headers"]["Authorization"] == "[REDACTED]"
    assert kwargs["api_base"] == "http://127.0.0.1:1/v1" and kwargs["temperature"] == 0
    # the config's long secret is also known by value: it is caught in free text
    assert "config-only-secret-123" not in scrubber.text("sent Bearer config-only-secret-123")


def test_a_secret_inside_another_is_replaced_whole():
    scrubber = Scrubber.from_environment({"A_TOKEN": "abcdefgh", "B_TOKEN": "abcdefgh-longer-one"})
    assert scrubber.text("abcdefgh-longer-one") == "[REDACTED:B_TOKEN]"
    assert scrubber.with_values({"EXTRA_KEY": "more-secret-value"}).text("more-secret-value") == "[REDACTED:EXTRA_KEY]"
