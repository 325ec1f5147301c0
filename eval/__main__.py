import sys

try:
    from eval.judge import zygote

    zygote.warm_early(sys.argv[1:])  # a command that starts workers: their zygote's import of torch begins now

    from eval.cli import cli  # noqa: E402
except KeyboardInterrupt:  # Ctrl-C while the harness itself still loads: nothing was measured yet
    print("interrupted before anything ran", file=sys.stderr)
    sys.exit(130)

cli()
