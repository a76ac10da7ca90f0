"""``python -m explorer`` is the ``explorer`` command, for environments without the script on PATH."""

from explorer.cli import program

if __name__ == "__main__":
    raise SystemExit(program())
