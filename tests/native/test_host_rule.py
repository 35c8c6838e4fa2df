"""The Host rule `llamay serve` and `llamay web` share: addresses, loopback names, the bound address and the
allowed names, nothing else (the servers' own tests drive it over loopback)."""

from __future__ import annotations

import pytest

from llamay.native.host_rule import host_allowed, host_name

NAMES = [("LocalHost:8080", "localhost"), ("[::1]:80", "::1"), ("::1", "::1"), ("example.com.", "example.com"),
         ("[fe80::1", ""), ("  ", "")]  # fmt: skip


@pytest.mark.parametrize(("header", "name"), NAMES)
def test_host_name(header, name):
    assert host_name(header) == name


@pytest.mark.parametrize("header", ["127.0.0.1:8080", "10.1.2.3", "[fe80::1]:80", "localhost", "app.localhost:3000",
                                    "LOCALHOST.", None])  # fmt: skip
def test_addresses_and_loopback_names_always(header):
    assert host_allowed(header)


@pytest.mark.parametrize("header", ["evil.example", "localhost.evil.example", "127.0.0.1.nip.io", "[fe80::1", "",
                                    "   ", "localhost:80:80"])  # fmt: skip
def test_other_names_never_by_default(header):
    assert not host_allowed(header)


def test_bound_and_allowed_names():
    bound = ("myhost.lan", "proxy.example:443", ".corp.example")
    for header in ("myhost.lan:8080", "proxy.example", "corp.example", "a.b.corp.example"):
        assert host_allowed(header, bound), header
    for header in ("sub.proxy.example", "notcorp.example", "corp.example.evil"):
        assert not host_allowed(header, bound), header
    assert host_allowed("anything.example", ["*"]) and not host_allowed("anything.example", [])
