from __future__ import annotations

import pytest

from afdep.config import KNOBS, Config, ConfigError


def test_defaults_and_values():
    assert Config.from_env({}) == Config(timeout_ms=10_000, jit_cache="~/.cache/afdep/jit")
    config = Config.from_env({"AFDEP_TIMEOUT_MS": "2500", "AFDEP_JIT_CACHE": "/tmp/x", "PATH": "/"})
    assert config.timeout_ms == 2500 and config.jit_cache == "/tmp/x"


def test_unknown_variable_is_named():
    with pytest.raises(ConfigError, match="unknown afdep variable AFDEP_TIMEOUT_SECONDS"):
        Config.from_env({"AFDEP_TIMEOUT_SECONDS": "3"})


@pytest.mark.parametrize("value", ["0", "-5", "ten", "1.5", ""])
def test_bad_timeout_is_named_with_its_value(value):
    with pytest.raises(ConfigError, match=f"AFDEP_TIMEOUT_MS={value!r}"):
        Config.from_env({"AFDEP_TIMEOUT_MS": value})


def test_empty_cache_path_is_named():
    with pytest.raises(ConfigError, match="AFDEP_JIT_CACHE"):
        Config.from_env({"AFDEP_JIT_CACHE": " "})


def test_digest_tells_configurations_apart():
    assert Config.from_env({}).digest() == Config().digest()
    assert Config(timeout_ms=1).digest() != Config().digest()


def test_every_knob_is_documented_in_the_readme():
    from pathlib import Path

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    for name in KNOBS:
        assert f"`{name}`" in readme, name
