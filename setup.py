"""The optional C part of memdir (everything else is in pyproject.toml).

memdir._scan speeds up the directory scan every command runs. It is optional: without a C
compiler the build skips it and memdir.core.files uses its Python loop instead.
"""

import sys

from setuptools import Extension, setup

ext_modules = []
if sys.platform != "win32":  # POSIX calls (fdopendir, fstatat)
    ext_modules.append(Extension("memdir._scan", ["src/memdir/_scan.c"], optional=True))

setup(ext_modules=ext_modules)
