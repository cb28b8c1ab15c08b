"""``python3 -m dpledger COMMAND``: command-line tools of the Python package.

  plot   pictures of a job's privacy spend (dpledger.plot; needs python3-matplotlib)
"""
import sys


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    if argv[0] == "plot":
        from .plot import main as plot_main
        return plot_main(argv[1:])
    print(f"dpledger: unknown command {argv[0]!r}\n{__doc__.strip()}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
