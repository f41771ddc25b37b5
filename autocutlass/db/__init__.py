"""The tuning database: where tuned winners and every evaluated trial are stored and looked up.

``TuningStore`` is one database (a SQLite file or any SQLAlchemy URL); ``LayeredStore`` puts the
user's database over the read-only ones shipped with autocutlass; ``export``/``import_``/``merge``
move records between files. Records returned are frozen dataclasses. Storage failures raise
``autocutlass.errors.DatabaseError`` (``SchemaMismatch`` for another schema version).
No GPU, torch or CUDA import is needed here.
"""

from autocutlass.db.engine import release, resolve
from autocutlass.db.layered import LayeredStore, shipped_db_paths
from autocutlass.db.models import SCHEMA_VERSION
from autocutlass.db.records import BestRecord, LookupSource, TrialRecord, TrialState
from autocutlass.keys import canonical_json, config_key
from autocutlass.db.schema import MIGRATIONS, upgrade
from autocutlass.db.store import TuningStore
from autocutlass.db.transfer import TransferStats, export, import_, merge

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "BestRecord",
    "LayeredStore",
    "LookupSource",
    "TransferStats",
    "TrialRecord",
    "TrialState",
    "TuningStore",
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
