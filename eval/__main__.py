from eval.cli import main

main()
