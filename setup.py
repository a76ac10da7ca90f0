"""The compiled parts: the checker's sequential loops (explorer/pipeline/analysis/kernels.py
says why) and the HLO diff's per-instruction loops (explorer/xla/hlo/kernels.py says why).
Everything else about the package is in pyproject.toml.

Both optional: where no C compiler is, the install goes on without them, the checker walks in
numpy and the HLO diff reads and matches in Python (the same answers, slower);
``tests/schedules/test_kernels.py`` and ``tests/hlo/test_hlo_kernels.py`` require them on
``make test``.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "explorer.pipeline.analysis._kernels",
            ["explorer/pipeline/analysis/_kernels.c"],
            optional=True,
        ),
        Extension(
            "explorer.xla.hlo._kernels",
            ["explorer/xla/hlo/_kernels.c"],
            optional=True,
        ),
    ]
)
