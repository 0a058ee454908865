"""Member settings: flags > JETLET_* environment > config file, strictly validated."""

from __future__ import annotations

import json
import pathlib

import pytest

from jetlet import config
from jetlet._cluster import member_flags, settings


def test_given_three_sources_then_flags_beat_environment_beat_file(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "member.toml"
    path.write_text('queue_size = 10\nbackup_count = 3\nname = "from-file"\nmembers = ["a:1", "b:2"]\n')
    environ = {"JETLET_QUEUE_SIZE": "20", "JETLET_NAME": "from-env", "PATH": "/bin"}
    loaded = settings.load({"name": "from-flag", "rest_port": None}, environ=environ, config_file=str(path))
    assert (loaded.name, loaded.queue_size, loaded.backup_count) == ("from-flag", 20, 3)
    assert loaded.members == ("a:1", "b:2")
    assert loaded.rest_port == 8701


def test_given_a_json_file_named_by_the_environment_then_it_is_read(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "member.json"
    path.write_text(json.dumps({"cooperative_thread_count": 2, "receive_window_multiplier": 5}))
    loaded = settings.load({}, environ={"JETLET_CONFIG_FILE": str(path), "JETLET_MEMBERS": "h:1, h:2"})
    instance = loaded.instance_config()
    assert instance.cooperative_thread_count == 2
    assert instance.default_edge_config.receive_window_multiplier == 5
    assert loaded.members == ("h:1", "h:2")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("queue_sise = 3\n", "unknown setting 'queue_sise' in config file"),
        ('queue_size = "big"\n', "'queue_size' from config file .* must be an integer"),
        ("backup_count = 9\n", "backup_count"),
        ("queue_size = [\n", "not valid TOML"),
    ],
)
def test_given_a_bad_file_when_loaded_then_the_key_is_named(
    tmp_path: pathlib.Path, content: str, message: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(content)
    with pytest.raises(settings.SettingsError, match=message):
        settings.load({}, environ={}, config_file=str(path))


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"JETLET_NOPE": "1"}, "unknown setting 'nope' in environment variable JETLET_NOPE"),
        ({"JETLET_QUEUE_SIZE": "x"}, "'queue_size' from environment variable JETLET_QUEUE_SIZE"),
        ({"JETLET_QUEUE_SIZE": "0"}, "'queue_size' must be >= 1"),
        ({"JETLET_REST_PORT": "70000"}, "'rest_port' must be a port"),
        ({"JETLET_FAILURE_TIMEOUT_MILLIS": "10"}, "failure_timeout_millis"),
    ],
)
def test_given_a_bad_environment_then_the_key_is_named(environ: dict[str, str], message: str) -> None:
    with pytest.raises(settings.SettingsError, match=message):
        settings.load({}, environ=environ)


def test_given_a_flag_of_the_wrong_type_when_loaded_then_refused() -> None:
    with pytest.raises(settings.SettingsError, match="'backup_count' from flags must be an integer"):
        settings.load({"backup_count": 1.5}, environ={})


def test_given_secret_and_token_files_then_they_are_read_and_hidden(tmp_path: pathlib.Path) -> None:
    (tmp_path / "secret").write_text("s3cret-of-16-chars\n")
    (tmp_path / "token").write_text("t0ken-of-16-chars\n")
    loaded = settings.load(
        {"secret_file": str(tmp_path / "secret"), "token_file": str(tmp_path / "token")}, environ={}
    )
    assert loaded.read_secret() == b"s3cret-of-16-chars"
    assert loaded.read_token() == "t0ken-of-16-chars"
    from_env = settings.load({}, environ={"JETLET_TOKEN": "abcdefghijklmnop"})
    assert from_env.read_token() == "abcdefghijklmnop" and "abcdefghijklmnop" not in repr(from_env)


@pytest.mark.parametrize("short", ["t", "fifteen-chars!!"])
def test_given_a_short_token_or_secret_when_read_then_refused_naming_its_source(
    tmp_path: pathlib.Path, short: str
) -> None:
    with pytest.raises(
        settings.SettingsError, match=r"'token' .from --token or JETLET_TOKEN. must be at least 16"
    ):
        settings.load({}, environ={"JETLET_TOKEN": short}).read_token()
    (tmp_path / "secret").write_text(short + "\n")
    loaded = settings.load({"secret_file": str(tmp_path / "secret")}, environ={})
    with pytest.raises(
        settings.SettingsError, match=f"'secret_file' {tmp_path / 'secret'}. must be at least 16"
    ):
        loaded.read_secret()


def test_given_a_missing_secret_file_when_read_then_the_setting_is_named(tmp_path: pathlib.Path) -> None:
    loaded = settings.load({"secret_file": str(tmp_path / "none")}, environ={})
    with pytest.raises(settings.SettingsError, match="'secret_file'"):
        loaded.read_secret()


def test_given_no_settings_then_the_instance_and_edge_defaults_are_the_configs_own() -> None:
    # the defaults are stated once, by InstanceConfig and EdgeConfig: a member restating one differently fails
    assert settings.MemberSettings().instance_config() == config.InstanceConfig()
    mirrored = {*settings.INSTANCE_SETTINGS, *settings.EDGE_SETTINGS}
    assert {
        "cooperative_thread_count",
        "flow_control_period_millis",
        "queue_size",
        "packet_size_limit",
    } <= mirrored
    assert mirrored <= settings.NAMES


def test_given_an_edge_setting_then_its_help_is_the_edge_configs_description() -> None:
    help_text = member_flags.help_texts()["packet_size_limit"]
    assert help_text.startswith("Most items in one network packet")
    assert help_text.endswith(f"(default {config.EdgeConfig().packet_size_limit})")
    assert member_flags.help_texts()["flow_control_period_millis"].startswith(
        "How often a receiver acknowledges"
    )


def test_given_every_instance_and_edge_setting_then_instance_config_carries_it() -> None:
    # when: each of them is set to a value other than its default
    values = {
        "cooperative_thread_count": 3,
        "flow_control_period_millis": 7,
        "backup_count": 2,
        "scale_up_delay_millis": 5,
        "partition_count": 13,
        "max_queued_bytes": 19_000_000,
        "queue_size": 11,
        "batch_queue_size": 23,
        "packet_size_limit": 17,
        "receive_window_multiplier": 4,
        "buffer_timeout_millis": 0,
    }
    assert set(values) == {*settings.INSTANCE_SETTINGS, *settings.EDGE_SETTINGS}
    instance = settings.load({name: str(value) for name, value in values.items()}).instance_config()
    # then: the instance config has every one of them
    assert instance == config.InstanceConfig(
        cooperative_thread_count=3,
        flow_control_period_millis=7,
        backup_count=2,
        scale_up_delay_millis=5,
        partition_count=13,
        max_queued_bytes=19_000_000,
        default_edge_config=config.EdgeConfig(
            queue_size=11,
            batch_queue_size=23,
            packet_size_limit=17,
            receive_window_multiplier=4,
            buffer_timeout_millis=0,
        ),
    )
