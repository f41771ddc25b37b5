"""The code stored records run, as digests: what ``autocutlass db rekey`` compares between the
kernel sources a record was measured with and the installed ones.

A record's timing stays true for as long as the code it launches is the same. The kernel-source
hash in its hard key changes with any edit of a family's hashed files, also one that leaves a
given config's generated code as it was (a comment, another config's branch, a helper kernel the
config does not launch). This module compiles the kernels of (family, config, problem) jobs, each
into a fresh, empty cache directory, and reports the sha256 of every object the runner built (the
family's kernel and the helper kernels it launches: split-K reduce, transpose), sorted, with the
family's source hash. Compiles are deterministic: the same sources give the same bytes, whatever
the cache key (checked by ``tests/test_db_rekey.py``).

It runs as a script against whichever ``autocutlass`` comes first on ``sys.path`` (an old source
tree through ``PYTHONPATH``), so it uses only what every version since the op-generic core has:
``kernels.get_family``, a family's ``config_from_dict``, ``compile`` and ``source_hash``, and
``ops.registry.problem_from_dict``::

    PYTHONPATH=OLD_TREE python autocutlass/kernels/code_digest.py JOBS.json [WORKERS]

JOBS.json: a list of [family, config dict, problem dict]. Prints one JSON object: the path of the
``autocutlass`` package it imported and, per job, ``{"src": hash, "digests": [...], "error": str or
null}``. GPU-blind (``CUDA_VISIBLE_DEVICES`` empty; ``CUTE_DSL_ARCH`` sm_90a unless set), every
gated family on, the shipped compiled kernels off (everything is compiled from the sources).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ENV = {"CUDA_VISIBLE_DEVICES": "", "AUTOCUTLASS_SHIPPED_KERNELS": "off"}
GATES = ("AUTOCUTLASS_GROUPED_KERNELS", "AUTOCUTLASS_CONV_DGRAD", "AUTOCUTLASS_CONV_DGRAD_STRIDED", "AUTOCUTLASS_GATED_KERNELS",
         "AUTOCUTLASS_SWIGLU_KERNELS", "AUTOCUTLASS_GEMV_KERNELS", "AUTOCUTLASS_CONV_WGRAD")  # fmt: skip
"""The variables of ``kernels.ALL_GATES`` (not imported: this file runs against other versions'
packages; a test keeps the two equal), all on: a record's family must build whatever the gates."""


def environment() -> dict[str, str]:
    """The variables a digest process runs with (see the module docstring)."""
    env = {**ENV, **{g: "1" for g in GATES}}
    env.setdefault("CUTE_DSL_ARCH", os.environ.get("CUTE_DSL_ARCH", "sm_90a"))
    return env


def forget_compiled() -> None:
    """Empty the process's in-memory kernel caches, so that the next compile writes its objects:
    a job whose compile key an earlier job of the same process built (another problem of the
    same kernel class) would else be served from memory and leave its cache directory empty."""
    try:
        from autocutlass.kernels import object_cache
    except ImportError:  # a tree from before the shared caches: nothing to forget
        return
    for state in getattr(object_cache, "_STATES", {}).values():
        state.memory.clear()


def digest_job(job: list[Any]) -> dict[str, Any]:
    """Compile one (family, config, problem) job into a fresh cache; its objects' digests."""
    family, config, problem = job
    os.environ.update(environment())
    from autocutlass.kernels import get_family
    from autocutlass.ops.registry import problem_from_dict

    forget_compiled()
    with tempfile.TemporaryDirectory(prefix="autocutlass-digest-") as tmp:
        try:
            fam = type(get_family(family))(cache_dir=Path(tmp))
            fam.compile(fam.config_from_dict(config), problem_from_dict(problem))
            src = fam.source_hash()
        except Exception as e:  # noqa: BLE001 - any failure means: not provably the same code
            return {"src": None, "digests": [], "error": f"{type(e).__name__}: {e}"}
        digests = sorted(hashlib.sha256(p.read_bytes()).hexdigest() for p in Path(tmp).glob("*.o"))
    return {"src": src, "digests": digests, "error": None if digests else "no object was compiled"}


def main(argv: list[str]) -> int:
    jobs = json.loads(Path(argv[1]).read_text())
    workers = int(argv[2]) if len(argv) > 2 else 1
    os.environ.update(environment())
    import autocutlass

    if workers > 1 and len(jobs) > 1:
        import concurrent.futures as cf
        import multiprocessing as mp

        with cf.ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
            results = list(pool.map(digest_job, jobs))
    else:
        results = [digest_job(j) for j in jobs]
    print(json.dumps({"autocutlass": str(Path(autocutlass.__file__).resolve().parent), "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
