"""Django's command line for the project: ``manage.py`` in a checkout, ``fimone-manage`` once the
package is installed (``pip install .``)."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fimone.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
