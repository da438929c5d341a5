"""The package index is read over one verifying TLS context per process
(harness/preparation/index.py): each request built its own before and loaded the system's CA
bundle again, about 20 CPU-seconds of the harness's per 40 instances of a cold run."""

from __future__ import annotations

import io
import json
import ssl
import urllib.request

from harness.preparation import index


def test_every_index_request_uses_the_same_verifying_context(monkeypatch):
    contexts: list = []

    def fake_urlopen(request, timeout=None, context=None):
        contexts.append(context)
        return io.BytesIO(json.dumps({"files": []}).encode())

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    monkeypatch.setattr(index, "_INDEX_CACHE", {})
    index.index_project("numpy")
    index.index_project("attrs")
    index.index_project("numpy")               # memoised: no third request
    assert len(contexts) == 2
    assert contexts[0] is contexts[1]
    assert isinstance(contexts[0], ssl.SSLContext)
    assert contexts[0].verify_mode == ssl.CERT_REQUIRED and contexts[0].check_hostname
