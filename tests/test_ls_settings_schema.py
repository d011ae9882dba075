"""The VS Code client's settings schema (vscode-client/package.json) and the server's settings
(helion_ls/session/settings.py) accept the same values: every setting, default, choice and bound of one is the other's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helion_ls.session.settings import _JSON_NAMES, CLIENT_ONLY, Settings, parse_settings

PACKAGE = Path(__file__).resolve().parents[1] / "vscode-client" / "package.json"
SCHEMA = {
    key.removeprefix("helion."): value
    for key, value in json.loads(PACKAGE.read_text())["contributes"]["configuration"]["properties"].items()
}
SERVER_KEYS = sorted(_JSON_NAMES)


def accepted(key: str, value: object) -> bool:
    return not parse_settings({key: value})[1]


def test_the_same_settings_on_both_sides():
    assert sorted(k for k in SCHEMA if k not in CLIENT_ONLY) == SERVER_KEYS


@pytest.mark.parametrize("key", SERVER_KEYS)
def test_the_client_default_is_the_server_default(key):
    default = SCHEMA[key]["default"]
    settings, problems = parse_settings({key: default})
    assert problems == [], problems
    assert settings == Settings(), f"helion.{key}: the client's default {default!r} is not the server's"


@pytest.mark.parametrize("key", [k for k in SERVER_KEYS if "enum" in SCHEMA[k]])
def test_every_choice_the_client_offers_the_server_takes(key):
    for value in SCHEMA[key]["enum"]:
        assert accepted(key, value), (key, value)
    assert not accepted(key, "no-such-choice")


@pytest.mark.parametrize("key", [k for k in SERVER_KEYS if {"minimum", "exclusiveMinimum", "maximum"} & set(SCHEMA[k])])
def test_numeric_bounds_agree(key):
    prop = SCHEMA[key]
    integer = "integer" in (prop["type"] if isinstance(prop["type"], list) else [prop["type"]])
    step = 1 if integer else 1e-3
    if "minimum" in prop:
        assert accepted(key, prop["minimum"]) and not accepted(key, prop["minimum"] - step), key
    if "exclusiveMinimum" in prop:
        low = prop["exclusiveMinimum"]
        assert not accepted(key, low) and accepted(key, low + step), key
    if "maximum" in prop:
        assert accepted(key, prop["maximum"]) and not accepted(key, prop["maximum"] + step), key
    if not ("minimum" in prop or "exclusiveMinimum" in prop) or "maximum" not in prop:
        pytest.fail(f"helion.{key}: the server has both bounds; the client schema should name both")


@pytest.mark.parametrize("key", [k for k in SERVER_KEYS if "pattern" in SCHEMA[k]])
def test_patterns_accept_what_the_server_accepts(key):
    pattern = re.compile(SCHEMA[key]["pattern"])
    samples = ["local", "local:1", "local:12", "local:0", "local:", "local:x", "inline", "inlined", "ray",
               "ray:auto", "ray:10.0.0.1:6379", "ray:", "slurm", ""]
    for value in samples:
        assert bool(pattern.fullmatch(value)) == accepted(key, value), (key, value)
