"""The one compiled part: the checker's sequential loops (explorer/pipeline/analysis/kernels.py
says why). Everything else about the package is in pyproject.toml.

Optional: where no C compiler is, the install goes on without it and the checker walks in numpy
(the same floats, slower); ``tests/schedules/test_kernels.py`` requires it on ``make test``.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "explorer.pipeline.analysis._kernels",
            ["explorer/pipeline/analysis/_kernels.c"],
            optional=True,
        )
    ]
)
