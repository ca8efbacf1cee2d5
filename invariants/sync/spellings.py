"""How a target spells what the publish contract looks for (its release,
acquire, fence, barrier and warp sync calls), and what the contract needs to
know of a target to check it: the engine's catalog holds one of each per
target (docs/synchronization.md, "The publish contract")."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol

from invariants.sync.sites import PRIMITIVE


@dataclass(frozen=True)
class ContractSpellings:
    """[target.contract]: how the target's source spells what the publish
    contract looks for (docs/synchronization.md, "The publish contract"), each a
    regular expression matching a called name, and the command that writes the
    PTX of every kernel variant (`<file>.ptx` and `index.json`, file -> label)."""

    ptx: tuple[str, ...] = ()  # empty: the contract is checked on the source only
    # What else the ptx command reads (paths from the tree's root: a harness,
    # headers beside the sources): in its cache key with the sources.
    ptx_inputs: tuple[str, ...] = ()
    # With units (paths from the tree's root), `ptx` compiles one of them
    # ({unit} -> {ptx}, its dependencies to {deps}), each cached by what it read.
    ptx_units: tuple[str, ...] = ()
    barrier: dict[str, re.Pattern[str]] = field(default_factory=dict)  # group -> call
    release: dict[str, re.Pattern[str]] = field(default_factory=dict)  # scope -> call
    acquire: dict[str, re.Pattern[str]] = field(default_factory=dict)  # scope -> call
    fence: dict[str, re.Pattern[str]] = field(default_factory=dict)  # scope -> call
    store: re.Pattern[str] | None = None  # a relaxed store a fence before it makes a publish
    load: re.Pattern[str] | None = None  # a relaxed load a fence after it makes an acquire


# [target.contract]'s keys: tables by group or scope, and single patterns.
CONTRACT_TABLES = {
    "barrier": ("warp", "block", "grid"),
    "release": ("sys", "gpu", "cta"),
    "acquire": ("sys", "gpu", "cta"),
    "fence": ("sys", "gpu", "cta"),
}
CONTRACT_PATTERNS = ("store", "load")


def call_pattern(text: str) -> re.Pattern[str]:
    """A spelling as the contract searches code for it: the name, then `(`.
    ValueError saying what is wrong with `text`."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"a regular expression, got {text!r}")
    try:
        pattern = re.compile(rf"\b(?:{text})\s*\(")
    except re.error as error:
        raise ValueError(f"{text!r} is not a regular expression: {error}") from None
    if re.fullmatch(rf"(?:{text})", ""):
        raise ValueError(f"{text!r} matches an empty name")
    return pattern


def spelling(pattern: re.Pattern[str]) -> str:
    """The text of a call_pattern, as a finding names it."""
    return pattern.pattern.removeprefix(r"\b(?:").removesuffix(r")\s*\(")


class ContractTarget(Protocol):
    """What the contract reads of a target: its name (its PTX cache's), its
    sources and the sites it declares there by anchors, its spellings (None:
    no contract), and the environment and time limit its PTX command runs under."""

    name: str
    sources: str
    anchors: tuple
    contract: ContractSpellings | None
    env: dict[str, str]
    timeout_s: float


def primitive_pattern(spellings: ContractSpellings | None) -> re.Pattern[str]:
    """What the site rule calls an ordering primitive in a target's code:
    CUDA's (invariants.sync.sites.PRIMITIVE), and every release, acquire,
    fence, relaxed store and load the target spells (its own flag helpers),
    so the rule speaks the target's words, not afdep's alone."""
    if spellings is None:
        return PRIMITIVE
    spelt = [
        pattern
        for table in (spellings.release, spellings.acquire, spellings.fence)
        for pattern in table.values()
    ] + [p for p in (spellings.store, spellings.load) if p is not None]
    if not spelt:
        return PRIMITIVE
    names = "|".join(spelling(p) for p in spelt)
    return re.compile(rf"{PRIMITIVE.pattern}|\b({names})\s*\(")
