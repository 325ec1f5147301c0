from eval.cli import cli

cli()
