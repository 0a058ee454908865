"""Given --members entries, when discovered, then static addresses stay and dns: names resolve."""

from __future__ import annotations

import dataclasses
import re

import pytest

from jetlet._cluster import discovery, kube_discovery, settings


def test_static_entries_are_kept_in_order_without_duplicates() -> None:
    assert discovery.discover(["10.0.0.1:5701", "10.0.0.2:5701", "10.0.0.1:5701"]) == (
        "10.0.0.1:5701",
        "10.0.0.2:5701",
    )


def test_a_dns_entry_becomes_every_address_of_the_name() -> None:
    # given a resolver standing in for a headless Service with three ready pods
    def resolve(name: str, port: int) -> list[str]:
        assert (name, port) == ("jet.default.svc.cluster.local", 5702)
        return ["10.1.0.3:5702", "10.1.0.1:5702", "10.1.0.2:5702"]

    # when discovered, then the pods' addresses replace the entry, after the static ones
    assert discovery.discover(["10.9.9.9:5702", "dns:jet.default.svc.cluster.local:5702"], resolve) == (
        "10.9.9.9:5702",
        "10.1.0.3:5702",
        "10.1.0.1:5702",
        "10.1.0.2:5702",
    )


def test_the_real_resolver_resolves_localhost_and_tolerates_unknown_names() -> None:
    assert "127.0.0.1:8080" in discovery.resolve_host("localhost", 8080)
    assert discovery.resolve_host("no-such-host.invalid", 8080) == []
    assert discovery.resolve_host("a" * 64 + ".invalid", 8080) == []


@pytest.mark.parametrize("entry", ["dns:", "dns:name", "dns:name:port", "dns::80", "dns:name:70000"])
def test_a_malformed_dns_entry_is_refused_naming_it(entry: str) -> None:
    with pytest.raises(ValueError, match="must look like dns:NAME:PORT"):
        discovery.discover([entry])


@pytest.mark.parametrize(
    "entry",
    [
        "127.0.0.1",
        "127.0.0.1:",
        ":8701",
        "host:port",
        "host:0",
        "host:70000",
        "http://h:1",
        "::1:80",
        "a b:1",
    ],
)
def test_a_malformed_address_entry_is_refused_naming_it(entry: str) -> None:
    with pytest.raises(ValueError, match=f"members: {re.escape(repr(entry))} must look like HOST:PORT"):
        discovery.Discovery([entry])


@pytest.mark.parametrize("entry", ["127.0.0.1:8701", "[::1]:8701", "jet-0.jet.default.svc:8701", "h:65535"])
def test_a_well_formed_address_entry_is_accepted(entry: str) -> None:
    assert discovery.discover([entry]) == (entry,)


def test_dns_discovery_looks_again_every_interval_and_never_has_a_problem() -> None:
    # given the settings' default discovery, with a name that does not resolve
    config = settings.MemberSettings(members=("127.0.0.1:5702", "dns:no-such-host.invalid:5702"))
    found = discovery.for_settings(config, {})
    # then the static entry stays, the name yields nothing, and nothing is reported as a problem
    assert found.seeds() == ("127.0.0.1:5702",)
    assert (found.problem, found.next_delay_s()) == ("", kube_discovery.INTERVAL_S)


def test_kubernetes_discovery_is_chosen_by_the_setting_and_validated_at_start() -> None:
    config = settings.MemberSettings(
        discovery="kubernetes",
        kubernetes_label_selector="app=jet",
        kubernetes_namespace="jet",
        kubernetes_api_server="http://127.0.0.1:1",
    )
    found = discovery.for_settings(config, {})
    assert found.pods is not None and found.pods.where.namespace == "jet"
    with pytest.raises(ValueError, match="must look like dns:NAME:PORT"):
        discovery.for_settings(dataclasses.replace(config, members=("dns:x",)), {})
