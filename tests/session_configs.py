"""The session configurations every correctness suite runs under (conformance, model tests).

The optimizer and the optimized kernels are checked against the plain path: a case must give the
same answer with nee's defaults, with graph optimizations off, with reference kernels only, and on
one thread (as tract's test-rt runs one suite against each runtime configuration).
"""

# name -> nee.SessionOptions attributes
CONFIGS = {
    "default": {},
    "no-opt": {"graph_optimization_level": 0},
    "reference": {"reference_kernels_only": True},
    "one-thread": {"intra_op_num_threads": 1},
}


def session_options(config):
    import nee

    options = nee.SessionOptions()
    for attr, value in CONFIGS[config].items():
        setattr(options, attr, value)
    return options
