"""`python -m etrun ARGS...` runs the installed etrun with ARGS, as `etrun ARGS...` would."""
import sys

from etrun import main

sys.exit(main())
