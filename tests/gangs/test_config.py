"""The configuration keys of gang dialects, queue keys and scheduler-name aliases."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from berth import app, config, reload
from berth.gangs import SOURCES
from berth.quota.naming import DEFAULT_QUEUE_KEYS
from berth.testing import make_pod


def test_every_dialect_and_every_frameworks_queue_key_is_on_by_default() -> None:
    cfg = config.parse({})
    assert cfg.gang_sources == list(SOURCES)
    assert list(SOURCES) == ["workload-api", "scheduler-plugins", "volcano", "kai", "kueue", "yunikorn"]
    assert cfg.queue_keys == list(DEFAULT_QUEUE_KEYS)
    assert cfg.queue_keys[0] == "berth.dev/queue"
    assert cfg.queue_aliases == {}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            {"gangSources": ["volcano", "slurm"]},
            "gangSources[1]: unknown gang source 'slurm' (known: workload-api, scheduler-plugins",
        ),
        ({"gangSources": ["kueue", "kueue"]}, "gangSources[1]: 'kueue' is listed twice"),
        ({"queueKeys": ["berth.dev/queue", ""]}, "queueKeys[1]: '' is not a label or annotation key"),
        ({"queueKeys": ["a", "a"]}, "queueKeys[1]: 'a' is listed twice"),
        (
            {"queueAliases": {"root.x": ""}},
            "queueAliases['root.x']: neither the name nor the queue it means may be empty",
        ),
        (
            {
                "profiles": [
                    {"schedulerName": "berth", "aliases": ["volcano"]},
                    {"schedulerName": "b2", "aliases": ["volcano"]},
                ]
            },
            "profiles[1].aliases[0]: 'volcano' is already claimed by profiles[0].aliases[0]",
        ),
        (
            {"profiles": [{"schedulerName": "berth"}, {"schedulerName": "b2", "aliases": ["berth"]}]},
            "profiles[1].aliases[0]: 'berth' is already claimed by profiles[0].schedulerName",
        ),
        (
            {"profiles": [{"schedulerName": "berth", "aliases": ["Not_A_Name"]}]},
            "profiles[0].aliases[0]: 'Not_A_Name' is not a valid scheduler name",
        ),
    ],
)
def test_bad_gang_and_queue_keys_and_aliases_stop_start_up_naming_the_field(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(config.ConfigError) as e:
        config.parse(doc)
    assert str(e.value).startswith(message)


def test_aliases_are_scheduler_names_of_their_profile() -> None:
    cfg = config.parse(
        {
            "profiles": [
                {"schedulerName": "berth", "aliases": ["volcano", "kai-scheduler"]},
                {"schedulerName": "batch", "aliases": ["yunikorn", "scheduler-plugins-scheduler"]},
            ]
        }
    )
    assert cfg.scheduler_names() == {
        "berth": "berth",
        "volcano": "berth",
        "kai-scheduler": "berth",
        "batch": "batch",
        "yunikorn": "batch",
        "scheduler-plugins-scheduler": "batch",
    }


def test_queue_keys_and_aliases_are_reloaded_with_the_queues(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "berth.yaml"
    queues = [{"name": "sandbox"}]
    path.write_text(yaml.safe_dump({"queues": queues}))
    berth = app.build(config.load(path), run_loop=False)
    reloader = reload.ConfigReloader(path, berth.core)
    pod = make_pod("y", labels={"yunikorn.apache.org/queue": "root.sandbox"})
    assert berth.core.quota.leaf_of(pod)[1].startswith('pod names queue "root.sandbox"')
    path.write_text(yaml.safe_dump({"queues": queues, "queueAliases": {"root.sandbox": "sandbox"}}))
    with caplog.at_level(logging.WARNING):
        assert reloader.check(force=True) is True
    assert berth.core.quota.leaf_of(pod) == ("sandbox", "")
    assert berth.core.cfg.queue_aliases == {"root.sandbox": "sandbox"}
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # applied, not "restart to apply"
