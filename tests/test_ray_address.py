"""A Ray address that is not one is said as such, before anything is contacted (hostile pass XIX-n, RA4: Ray's own
"Unable to parse port number" came with our "something answers there")."""
from __future__ import annotations

import socket

import pytest

from topicaudit.engine.execution.ray_auth import check_reachable
from topicaudit.errors import UserError


@pytest.mark.parametrize("address", ["garbage:xx", "garbage", "127.0.0.1:99999", "127.0.0.1:0", ":6379", "AUTO"])
def test_an_address_that_is_not_host_port_is_refused_naming_the_form(address):
    with pytest.raises(UserError) as refused:
        check_reachable(address)
    message = str(refused.value)
    assert repr(address) in message and "HOST:PORT" in message and "something answers" not in message


@pytest.mark.parametrize("address", ["auto", "local"])
def test_the_named_addresses_go_to_ray_unprobed(address):
    check_reachable(address)  # nothing to probe: ray.init finds the cluster, or says it found none


def test_a_port_nobody_listens_on_is_said_as_such():
    with socket.socket() as probe:  # a port free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(UserError, match="nothing is listening"):
        check_reachable(f"127.0.0.1:{port}")
