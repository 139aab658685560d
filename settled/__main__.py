"""`python -m settled`: the command line, the one hand-over upward from the ground floor."""

from settled.cli.main import main

if __name__ == "__main__":
    main()
