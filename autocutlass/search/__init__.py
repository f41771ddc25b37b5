"""Search: a kernel family's space as Optuna distributions, out-of-process evaluation, the timing
protocol and verification; ``tune_problem`` ties them together.

Modules: ``space`` (configs, feasibility, Optuna axes), ``strategy`` (grid or seeded TPE),
``workers`` (compile children and the GPU benchmark child), ``handlers`` (what those children
run), ``verify`` (inputs, reference, tolerance; imports torch), ``timing`` (the protocol),
``tuner`` (the loop, ``TrialSink``, results). search/ does not import db/: the tuner records
into any ``TrialSink``, which ``autocutlass.db.TuningStore`` satisfies.
"""

from autocutlass.search.space import Candidate, SearchSpace, config_key
from autocutlass.search.timing import Timing, beats, time_callable
from autocutlass.search.tuner import (
    Evaluator,
    TrialResult,
    TrialSink,
    TuneProgress,
    TuneResult,
    select_winner,
    tune_problem,
)
from autocutlass.search.workers import (
    STATES,
    CandidatePipeline,
    EvalOutcome,
    IsolatedWorker,
    WorkerError,
)

__all__ = [
    "STATES",
    "Candidate",
    "CandidatePipeline",
    "EvalOutcome",
    "Evaluator",
    "IsolatedWorker",
    "SearchSpace",
    "Timing",
    "TrialResult",
    "TrialSink",
    "TuneProgress",
    "TuneResult",
    "WorkerError",
    "beats",
    "config_key",
    "select_winner",
    "time_callable",
    "tune_problem",
]
