"""Driver (not a submission): runs modes.timed on vectoradd with a small max_blob (MAX_REPLY_BYTES
monkeypatched) for a submission file, and prints per reply: runs, whole/same_as outs, blob bytes, and
whether the judge's stop rule over ALL samples would have stopped where the loop ended.
Usage (from /work/main): python3 tests/adversarial/redteam12/run_split.py FILE [max_blob_bytes] [repeats]"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from eval import problem_folder, stats  # noqa: E402
from eval.cases import make_case  # noqa: E402
from eval.judge import modes, runner as runner_module  # noqa: E402

sub = Path(sys.argv[1]).resolve()
max_blob = int(sys.argv[2]) if len(sys.argv) > 2 else 600_000
repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 40
runner_module.MAX_REPLY_BYTES = max_blob
problem_folder.use(ROOT / "tests" / "problems" / "vectoradd")
case = make_case({"size": 384, "seed": 3})
options = modes.Options(timeout=120, wall_cap_s=60.0, baseline=False, log_dir=Path("/tmp/rt12_logs"))
replies = []
r = modes.Runner(sub, options)
orig = r.call
r.call = lambda op, payload, timeout=None: replies.append(orig(op, payload)) or replies[-1]
try:
    samples = modes.timed(r, modes.new_case(case, options), options, (repeats, modes.NO_LIMIT), False)
    err = None
except Exception as e:  # noqa: BLE001
    samples, err = [], repr(e)
finally:
    r.close()
for k, rep in enumerate(replies):
    runs = rep.header.get("runs", [])
    outs = [c.get("out", {}) for run in runs for c in run["calls"]]
    print(f"reply {k}: runs={len(runs)} whole={sum('blob' in o for o in outs)} same_as={sum('same_as' in o for o in outs)} "
          f"blob={len(rep.blob)} max_blob={rep.header['params'].get('max_blob')}")
print("samples", len(samples), "error", err)
if samples:
    print("judge's stop rule over all samples at the end:",
          stats.should_stop(samples, 1e12, modes.NO_LIMIT, 60e9))
