"""The device server's trust model: it listens where the tracker is reached, and warns when exposed.

TVM RPC has no authentication: whoever reaches ``tensorgym rpc-server``'s port runs any code on the
device. It used to listen on 0.0.0.0 by default, silently. Nothing here binds a public address: the
address choice and the warning are pure functions, and the command's ``serve`` is replaced.
"""

from __future__ import annotations

import logging

import pytest

from tensorgym.cli import build_parser, main
from tensorgym.measure import rpc_server
from tensorgym.measure.rpc_server import default_host, exposure_warning, warn_if_exposed


def test_the_default_host_for_a_local_tracker_is_loopback():
    assert default_host(("127.0.0.1", 9190)) == "127.0.0.1"
    assert default_host(("localhost", 9190)) in ("127.0.0.1", "::1")


def test_the_default_host_is_the_interface_that_reaches_the_tracker(monkeypatch):
    """A UDP socket connect()ed to the tracker (no packet sent) names the local address used to reach it."""
    seen = {}

    class Probe:
        def __init__(self, family, kind):
            seen["socket"] = (family, kind)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def connect(self, address):
            seen["connect"] = address

        def getsockname(self):
            return ("10.1.2.3", 40000)

    monkeypatch.setattr(rpc_server.socket, "socket", Probe)
    assert default_host(("10.0.0.1", 9190)) == "10.1.2.3"
    assert seen["connect"] == ("10.0.0.1", 9190) and seen["socket"][1] == rpc_server.socket.SOCK_DGRAM


def test_an_unresolvable_tracker_is_one_clear_error():
    from tensorgym.errors import TensorgymError

    with pytest.raises(TensorgymError, match="cannot resolve the tracker's host"):
        default_host(("no-such-host.invalid", 9190))


@pytest.mark.parametrize("host", ["8.8.8.8", "1.1.1.1", "2001:4860:4860::8888"])
def test_a_public_address_is_warned_about_in_one_line(host):
    text = exposure_warning(host)
    assert text is not None and "\n" not in text
    assert host in text and "public" in text and "no authentication" in text


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "10.0.0.5", "172.16.3.4", "192.168.1.20", "fd00::1"])
def test_a_private_or_loopback_address_is_not(host):
    assert exposure_warning(host) is None


def test_every_interface_is_warned_about_only_where_one_is_public():
    assert exposure_warning("0.0.0.0", interfaces=["127.0.0.1", "10.0.0.5", "fe80::1"]) is None
    text = exposure_warning("0.0.0.0", interfaces=["127.0.0.1", "10.0.0.5", "203.0.113.9", "8.8.4.4"])
    assert text is not None and "\n" not in text and "8.8.4.4" in text and "every interface" in text


def test_the_warning_is_logged_once(caplog):
    with caplog.at_level(logging.WARNING, logger="tensorgym"):
        warn_if_exposed("8.8.8.8")
        warn_if_exposed("127.0.0.1")
    records = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(records) == 1 and "8.8.8.8" in records[0].getMessage()


@pytest.mark.parametrize("argv, host", [([], "127.0.0.1"), (["--host", "8.8.8.8"], "8.8.8.8"),
                                        (["--host", "0.0.0.0"], "0.0.0.0")])
def test_the_command_listens_on_the_tracker_interface_unless_told(monkeypatch, argv, host):
    called = {}

    def serve(tracker, key, **kwargs):
        called.update(tracker=tracker, key=key, **kwargs)
        return 0

    monkeypatch.setattr(rpc_server, "serve", serve)
    assert main(["rpc-server", "--tracker", "127.0.0.1:9190", "--key", "zen5", *argv]) == 0
    assert called["host"] == host and called["tracker"] == ("127.0.0.1", 9190)


def test_the_help_and_the_docs_say_there_is_no_authentication(capsys):
    from pathlib import Path

    with pytest.raises(SystemExit):
        build_parser().parse_args(["rpc-server", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "no authentication" in help_text and "127.0.0.1" in help_text
    assert "default: 0.0.0.0" not in help_text
    guide = Path(__file__).resolve().parent.parent / "docs" / "howto" / "distributed.md"
    assert "TVM RPC has no authentication" in " ".join(guide.read_text().split())
