"""`python -m quantroute.demo`: the simulated-fleet demo (`make demo`)."""

from quantroute.demo.simulated import main

if __name__ == "__main__":
    main()
