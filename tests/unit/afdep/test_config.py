from __future__ import annotations

import pytest

from afdep.config import KNOBS, Settings, ConfigError


def test_defaults_and_values():
    assert Settings.from_env({}) == Settings(timeout_ms=10_000, jit_cache="~/.cache/afdep/jit")
    config = Settings.from_env({"AFDEP_TIMEOUT_MS": "2500", "AFDEP_JIT_CACHE": "/tmp/x", "PATH": "/"})
    assert config.timeout_ms == 2500 and config.jit_cache == "/tmp/x"


def test_unknown_variable_is_named():
    with pytest.raises(ConfigError, match="unknown afdep variable AFDEP_TIMEOUT_SECONDS"):
        Settings.from_env({"AFDEP_TIMEOUT_SECONDS": "3"})


@pytest.mark.parametrize("value", ["0", "-5", "ten", "1.5", ""])
def test_bad_timeout_is_named_with_its_value(value):
    with pytest.raises(ConfigError, match=f"AFDEP_TIMEOUT_MS={value!r}"):
        Settings.from_env({"AFDEP_TIMEOUT_MS": value})


def test_empty_cache_path_is_named():
    with pytest.raises(ConfigError, match="AFDEP_JIT_CACHE"):
        Settings.from_env({"AFDEP_JIT_CACHE": " "})


def test_protocol_covers_the_protocol_knobs_only():
    assert Settings.from_env({}).protocol() == Settings().protocol()
    assert Settings(ungate=True).protocol() != Settings().protocol()
    assert Settings(timeout_ms=1).protocol() == Settings().protocol()  # a per-rank choice


def test_combine_sms_is_a_per_rank_grid_whose_default_is_the_device():
    assert Settings.from_env({}).combine_sms is None  # the Buffer takes every SM of its device
    assert Settings.from_env({"AFDEP_COMBINE_SMS": "132"}).combine_sms == 132
    assert Settings(combine_sms=8).protocol() == Settings().protocol()  # the grid, not the protocol
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"AFDEP_COMBINE_SMS": "0"})
    assert str(caught.value) == "AFDEP_COMBINE_SMS='0': expected a positive integer"


def test_expand_sms_is_a_per_rank_cap_not_part_of_the_protocol():
    assert Settings.from_env({}).expand_sms is None  # ffn_expand takes every SM it can hold
    assert Settings.from_env({"AFDEP_EXPAND_SMS": "7"}).expand_sms == 7
    assert Settings(expand_sms=7).protocol() == Settings().protocol()
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"AFDEP_EXPAND_SMS": "x"})
    assert str(caught.value) == "AFDEP_EXPAND_SMS='x': expected a positive integer"


def test_count_first_knobs_and_protocol_choice():
    config = Settings.from_env(
        {
            "AFDEP_COUNT_FIRST_MIN_BUCKET": "512",
            "AFDEP_COUNT_FIRST_ARM": "attention",
            "AFDEP_COUNT_FIRST_WARP_COUNT": "4",
            "AFDEP_COUNT_FIRST_UNGATE": "1",
            "AFDEP_COUNT_FIRST_UNGATED_TOKENS": "48",
            "AFDEP_COUNT_FIRST_EPILOGUE_SMS": "48",
            "AFDEP_COUNT_FIRST_UNIT_MIN_ROWS": "32",
        }
    )
    assert (config.min_bucket, config.arm, config.warp_count, config.ungate) == (
        512,
        "attention",
        4,
        True,
    )
    assert (config.ungated_tokens, config.epilogue_sms, config.unit_min_rows) == (48, 48, 32)
    assert not config.count_first(511) and config.count_first(512)
    assert not Settings().count_first(2048)  # unset MIN_BUCKET: count-first is off
    assert not Settings(min_bucket=1, payload_first=True).count_first(2048)


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("AFDEP_COUNT_FIRST_ARM", "gpu", "expected ffn or attention"),
        ("AFDEP_COUNT_FIRST_WARP_COUNT", "17", "an epilogue CTA has 16 warps at most"),
        ("AFDEP_COUNT_FIRST_UNGATE", "yes", "expected 0 or 1"),
        ("AFDEP_PAYLOAD_FIRST", "2", "expected 0 or 1"),
        ("AFDEP_COUNT_FIRST_UNGATED_TOKENS", "-1", "expected a non-negative integer"),
        ("AFDEP_COUNT_FIRST_MIN_BUCKET", "0", "expected a positive integer"),
    ],
)
def test_bad_count_first_values_are_named(name, value, message):
    with pytest.raises(ConfigError, match=f"{name}={value!r}: {message}"):
        Settings.from_env({name: value})


def test_disagreement_names_the_knob_and_every_rank():
    from afdep.config import disagreement

    same = [Settings(min_bucket=1).protocol()] * 2
    assert disagreement(same) is None
    problem = disagreement(
        [Settings(min_bucket=1).protocol(), Settings(min_bucket=1, ungate=True).protocol()]
    )
    assert problem == (
        "all ranks must use the same count-first configuration: "
        "AFDEP_COUNT_FIRST_UNGATE differs (rank 0: False, rank 1: True)"
    )


def test_every_knob_is_documented_in_the_readme():
    from pathlib import Path

    readme = (Path(__file__).parents[3] / "README.md").read_text()
    for name in KNOBS:
        assert f"`{name}`" in readme, name


def test_timeout_is_bounded_by_the_int64_nanoseconds_the_device_reads():
    from afdep.config import MAX_TIMEOUT_MS

    assert MAX_TIMEOUT_MS == 9_223_372_036_854
    assert MAX_TIMEOUT_MS * 1_000_000 <= 2**63 - 1 < (MAX_TIMEOUT_MS + 1) * 1_000_000
    limit = str(MAX_TIMEOUT_MS)
    assert Settings.from_env({"AFDEP_TIMEOUT_MS": limit}).timeout_ms == MAX_TIMEOUT_MS
    for value in (str(MAX_TIMEOUT_MS + 1), "99999999999999999999"):
        with pytest.raises(ConfigError) as error:
            Settings.from_env({"AFDEP_TIMEOUT_MS": value})
        assert str(error.value) == (
            f"AFDEP_TIMEOUT_MS={value!r}: at most 9223372036854 (the device wait counts "
            "nanoseconds in an int64)"
        )


def test_environment_error_is_the_config_error_or_none():
    from afdep.config import environment_error

    assert environment_error({"AFDEP_TIMEOUT_MS": "5", "HOME": "/"}) is None
    assert environment_error({"AFDEP_TIMOUT_MS": "5"}).startswith(
        "unknown afdep variable AFDEP_TIMOUT_MS; known: ['AFDEP_COMBINE_SMS'"
    )
    assert environment_error({"AFDEP_JIT_CACHE_MAX_MB": "0"}) == (
        "AFDEP_JIT_CACHE_MAX_MB='0': expected a positive integer"
    )
