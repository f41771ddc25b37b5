"""The tuning database: where tuned winners and every evaluated trial are stored and looked up.

``TuningStore`` is one database (a SQLite file or any SQLAlchemy URL) holding problems of every
op (``ops.base.OpProblem``); ``TuningStore(path, read_only=True)`` inspects one without ever
creating or writing anything. ``LayeredStore`` puts the user's database over the read-only ones
shipped with autocutlass and leaves a failing database alone for a while (backoff), so lookups
never wait on a dead server twice. ``export``/``import_``/``merge`` move records between files;
``upgrade`` migrates an older schema (a SQLite file is first copied to ``backup_path``). Records
returned are frozen dataclasses. Storage failures raise ``autocutlass.errors.DatabaseError``
(``SchemaMismatch`` for another schema version). No GPU, torch or CUDA import is needed here.
"""

from typing import TYPE_CHECKING

from autocutlass._lazy import lazy_exports

if TYPE_CHECKING:
    from autocutlass.db.engine import release, resolve
    from autocutlass.db.layered import BACKOFF_FIRST_S, BACKOFF_MAX_S, LayeredStore, shipped_db_paths
    from autocutlass.db.models import SCHEMA_VERSION
    from autocutlass.db.records import BestRecord, LookupSource, TrialRecord, TrialState
    from autocutlass.db.schema import MIGRATIONS, backup_path, upgrade
    from autocutlass.db.store import TuningStore
    from autocutlass.db.transfer import TransferStats, export, import_, merge
    from autocutlass.keys import canonical_json, config_key

# Where each public name lives. Imported on first access (PEP 562): ``from autocutlass.db import
# LayeredStore, TuningStore`` loads the lookup path only, without SQLAlchemy (``db.sqlite_read``);
# the other modules load it when used.
_HOMES = {
    "release": "engine", "resolve": "location",
    "BACKOFF_FIRST_S": "layered", "BACKOFF_MAX_S": "layered", "LayeredStore": "layered", "shipped_db_paths": "layered",
    "SCHEMA_VERSION": "versions",
    "BestRecord": "records", "LookupSource": "records", "TrialRecord": "records", "TrialState": "records",
    "MIGRATIONS": "schema", "backup_path": "schema", "upgrade": "schema",
    "TuningStore": "store",
    "TransferStats": "transfer", "export": "transfer", "import_": "transfer", "merge": "transfer",
    "canonical_json": "records", "config_key": "records",
}  # fmt: skip


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, globals())

__all__ = [
    "BACKOFF_FIRST_S",
    "BACKOFF_MAX_S",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "BestRecord",
    "LayeredStore",
    "LookupSource",
    "TransferStats",
    "TrialRecord",
    "TrialState",
    "TuningStore",
    "backup_path",
    "canonical_json",
    "config_key",
    "export",
    "import_",
    "merge",
    "release",
    "resolve",
    "shipped_db_paths",
    "upgrade",
]
