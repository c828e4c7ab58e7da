from haggler.cli import main

main()
