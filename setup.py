"""Finds the distribution's packages, so a new subpackage is never left out of the install.

Everything else is in pyproject.toml. The three code folders are mapped into one package
(``[tool.setuptools.package-dir]``: audit → topicaudit, targets → topicaudit.targets, reports →
topicaudit.reports), a renaming that pyproject's own package discovery cannot express; here each
folder's subpackages are found and named under the package it becomes.
"""
from setuptools import find_packages, setup

FOLDERS = {"topicaudit": "audit", "topicaudit.targets": "targets", "topicaudit.reports": "reports"}

setup(packages=[name for package, folder in FOLDERS.items()
                for name in (package, *(f"{package}.{sub}" for sub in find_packages(folder)))])
