"""Package of the component: the evaluator runs `pip install .` on this folder."""

from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent.resolve()
REQUIREMENTS = [
    line.strip()
    for line in (HERE / "requirements.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
]

setup(
    name="challenge_solution",
    version="1.0",
    packages=find_packages(),
    include_package_data=True,
    install_requires=REQUIREMENTS,
)
