from retriage.cli import main

main()
