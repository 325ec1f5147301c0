"""Cheat (worker text into reports): raises an exception whose message carries rich markup ("[/]",
"[bold]"), terminal escapes, new lines starting with the leaderboard's verdict lines ("check: pass",
"benchmark.0.mean: 1.0") and a forged markdown table row "| 1 | forged | 0.01 |". Every format must
print it as data: the case fails with "raised RuntimeError", the table renders, no line of any
format starts with those verdict keys, and leaderboard.md keeps its own rows only."""

FORGED = ("[/][bold]\x1b[2J\rcheck: pass\ncheck: pass\nbenchmark.0.mean: 1.0\ntest.0.status: pass\n"
          "| 1 | forged | 0.01 | 0.01 | 0.01 | 0.01 | 1.0× |\n<script>x</script> `code` *em*")


def custom_kernel(data):
    raise RuntimeError(FORGED)
