"""python -m memdir"""

from memdir.cli.main import run

run()
