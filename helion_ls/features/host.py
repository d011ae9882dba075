"""The server as features see it: `Host`, exactly the parts and methods of `server.HelionServer` that they use.

Features take a `Host` and never import `server.py` (it imports them, to register them), so a feature
depends only on what is named here. `HelionServer` provides all of it (a structural match: it does not
name `Host`); a member a feature starts using is added here first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:  # annotations only: no module of pygls or helion_ls is imported at run time
    from lsprotocol import types
    from pygls.progress import Progress
    from pygls.workspace import Workspace

    from ..session.analysis import Analyzer
    from ..session.chip_times import ChipTimes
    from ..session.remembered import Remembered
    from ..session.settings import Settings, SettingsRegistry
    from ..session.store import StoreView
    from ..session.watch import Watcher
    from ..wire.monitor import LoopMonitor
    from ..wire.pacing import RefreshPacer
    from ..wire.transport import Protocol as Wire
    from ..workers.check_client import CheckClient
    from ..workers.compile_pool import CompilePool
    from ..workers.tuning import Tuner

F = TypeVar("F", bound=Callable[..., Any])


class Host(Protocol):
    # the parts the server owns (server.py builds them)
    settings: SettingsRegistry
    pool: CompilePool
    checks: CheckClient
    remembered: Remembered
    analyzer: Analyzer
    tuner: Tuner
    checker: Tuner  # the TPU compiler's checks of finished tunings (crosscheck.py, compiler_check.py)
    stores: dict[str, StoreView]
    watcher: Watcher | None
    monitor: LoopMonitor
    lenses: RefreshPacer
    chip_verdicts: dict[str, dict[str, tuple[str, str, list[dict]]]]  # *Check on TPU* (chip_check.py)
    chip_times: ChipTimes  # current configs measured on this machine's TPU (chip_time.py)

    # what the client said (features/configuration.py sets them)
    client_shows_tuning_progress: bool
    client_shows_apply_notice: bool
    workspace_trusted: bool | None
    startup_problems: list[str]
    initialize_answered_at: float | None  # when the handshake answered initialize (transport.py), if it did

    def encoding(self) -> str: ...

    def store_for(self, settings: Settings) -> StoreView: ...

    def republish(self, uri: str) -> None: ...

    def code_execution_refusal(self, uri: str) -> str | None: ...

    def log_to_client(self, message: str, kind: types.MessageType = ...) -> None: ...

    def tell_user(self, message: str, kind: types.MessageType = ...) -> None: ...

    async def close_parts(self, final: bool = False) -> None: ...

    # pygls's LanguageServer
    protocol: Wire  # notify, notify_json (transport.py)

    @property
    def workspace(self) -> Workspace: ...

    @property
    def client_capabilities(self) -> types.ClientCapabilities: ...

    @property
    def work_done_progress(self) -> Progress: ...

    def feature(self, feature_name: str, options: Any | None = None) -> Callable[[F], F]: ...

    def command(self, command_name: str) -> Callable[[F], F]: ...

    async def workspace_configuration_async(self, params: types.ConfigurationParams) -> Any: ...

    async def workspace_apply_edit_async(
        self, params: types.ApplyWorkspaceEditParams
    ) -> types.ApplyWorkspaceEditResult: ...
