"""SidecarConfig: defaults, Go-style durations or seconds, unknown keys refused."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import ValidationError

from policies.availability import Thresholds
from policies.sidecar_config import SidecarConfig, parse_duration


def test_defaults():
    config = SidecarConfig()
    assert config.model_dump() == {
        "availability": {"enabled": True, "interval": "5m0s", "misses": 3, "grace": "10m0s", "concurrency": 8},
        "referencedSet": {"enabled": True, "configMap": "catalog-warden-referenced-set", "namespace": "catalog-warden"},
        "reclaim": {"safetyAge": "24h0m0s", "perPassCap": 100, "dryRun": False, "maxRemovalShare": 0.5},
        "retention": {
            "enabled": False,
            "interval": "1h0m0s",
            "minRedAge": "168h0m0s",
            "keepLast": 3,
            "excludedNamespaces": (),
            "maxDeletesPerSweep": 50,
            "dryRun": False,
        },
        "packages": {"enabled": None},
        "chartIndex": {"enabled": None, "interval": "5m0s", "concurrency": 8},
    }
    assert config.availability.thresholds() == Thresholds(3, timedelta(minutes=10))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("5m", timedelta(minutes=5)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("1.5h", timedelta(minutes=90)),
        ("300ms", timedelta(milliseconds=300)),
        ("0", timedelta(0)),
        (90, timedelta(seconds=90)),
        (2.5, timedelta(seconds=2.5)),
    ],
)
def test_durations(value, expected):
    assert parse_duration(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("5", "invalid duration '5': use a Go duration such as 90s, 5m or 1h30m, or a number of seconds"),
        ("5 m", "invalid duration '5 m': use a Go duration such as 90s, 5m or 1h30m, or a number of seconds"),
        ("5d", "invalid duration '5d': use a Go duration such as 90s, 5m or 1h30m, or a number of seconds"),
        (True, "invalid duration True: use a Go duration such as 90s, 5m or 1h30m, or a number of seconds"),
        ("-1s", "invalid duration '-1s': must not be negative"),
        (-3, "invalid duration -3: must not be negative"),
    ],
)
def test_bad_durations(value, message):
    with pytest.raises(ValueError) as err:
        parse_duration(value)
    assert str(err.value) == message


def test_yaml_shaped_input_and_round_trip():
    raw = {
        "availability": {"interval": "1m", "misses": 5, "grace": 30, "concurrency": 2},
        "reclaim": {"safetyAge": "72h", "perPassCap": 10, "dryRun": True},
    }
    config = SidecarConfig.model_validate(raw)
    assert config.availability.thresholds() == Thresholds(5, timedelta(seconds=30))
    assert config.reclaim.safetyAge == timedelta(hours=72)
    assert SidecarConfig.model_validate(config.model_dump()) == config


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ({"availabilty": {}}, "availabilty"),
        ({"availability": {"misses": 0}}, "availability.misses"),
        ({"availability": {"interval": "0s"}}, "availability.interval"),
        ({"availability": {"grace": "soon"}}, "availability.grace"),
        ({"referencedSet": {"configmap": "x"}}, "referencedSet.configmap"),
        ({"reclaim": {"perPassCap": -1}}, "reclaim.perPassCap"),
        ({"reclaim": {"maxRemovalShare": 1.5}}, "reclaim.maxRemovalShare"),
        ({"reclaim": {"maxRemovalShare": -0.1}}, "reclaim.maxRemovalShare"),
        ({"reclaim": {"maxRemovalShare": "half"}}, "reclaim.maxRemovalShare"),
    ],
)
def test_mistakes_are_errors(raw, where):
    with pytest.raises(ValidationError) as err:
        SidecarConfig.model_validate(raw)
    assert [".".join(str(p) for p in e["loc"]) for e in err.value.errors()] == [where]


@pytest.mark.parametrize("section", ["availability", "retention", "chartIndex"])
def test_every_loop_interval_must_be_positive(section: str) -> None:
    with pytest.raises(ValueError, match=f"{section}.interval\n  Value error, must be greater than 0"):
        SidecarConfig.model_validate({section: {"interval": "0s"}})
