#!/usr/bin/env python
import sys


def main() -> None:
    # healthbench_web.cli also stops a command on an unmigrated database with "run migrate first".
    from healthbench_web.cli import run

    run(sys.argv, program="manage.py")


if __name__ == "__main__":
    main()
