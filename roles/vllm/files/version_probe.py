# Prints the installed versions of the packages named as arguments, space separated, from the venv's
# package metadata (run by the venv's own interpreter); exit status 1 when one is not installed.
import importlib.metadata as m
import sys

try:
    print(" ".join(m.version(n) for n in sys.argv[1:]))
except m.PackageNotFoundError:
    sys.exit(1)
