"""A catalog's configs: how a run of the target differs from the plain run
command (arguments, environment, GPUs), and the real-size twin each config
gets from the catalog's [exposure] table."""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Config:
    name: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    gpus: int = 0  # GPUs this config's runs need (`{gpus}` in the run command); 0: the target's
    base: str | None = None  # an exposure twin's config: the faults that run under it run here


@dataclass(frozen=True)
class Exposure:
    """[exposure]: the real-size runs the sweep adds (docs/architecture.md,
    "Exposure at real sizes"): every config gets a twin `<config>@<name>`
    whose run command ends with `args` and whose environment adds `env`;
    the config's faults run under it too."""

    name: str
    args: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)

    def twin(self, config: Config) -> Config:
        return replace(
            config,
            name=f"{config.name}@{self.name}",
            args=config.args + self.args,
            env={**config.env, **self.env},
            base=config.name,
        )
