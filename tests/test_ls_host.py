"""Features see the server only as `features.host.Host`: the server has every member Host names. That no module
of features/ imports server.py or a feature is held with the other import rules (tests/test_import_direction.py)."""

from __future__ import annotations

import inspect

from helion_ls.features.host import Host
from helion_ls.server import create_server


def test_the_server_has_every_member_features_use():
    server = create_server()
    cls = type(server)
    for name in Host.__annotations__:
        assert name in vars(server) or hasattr(cls, name), name
    for name, member in vars(Host).items():
        if name.startswith("_"):
            continue
        if isinstance(member, property):
            assert isinstance(getattr(cls, name, None), property), name
        else:
            theirs = getattr(cls, name)
            assert callable(theirs), name
            assert inspect.iscoroutinefunction(theirs) == inspect.iscoroutinefunction(member), name
