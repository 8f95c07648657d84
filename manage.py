#!/usr/bin/env python
"""Django's command-line utility for administrative tasks (``fimone-manage`` once installed)."""

from fimone.manage import main

if __name__ == "__main__":
    main()
