import sys

from eval.judge import zygote

zygote.warm_early(sys.argv[1:])  # a command that starts workers: their zygote's import of torch begins now

from eval.cli import cli  # noqa: E402

cli()
