// Custom ops written in Python (SessionOptions.register_custom_op): each is a
// nee/_custom_ops.py PythonOp registered with nee_session_options_add_custom_op.
#pragma once
#include <nanobind/nanobind.h>

#include <string>
#include <tuple>
#include <vector>

#include "nee/nee.h"

namespace nee_python {

// (domain, op_type, since_version, min_inputs, max_inputs, min_outputs, max_outputs, PythonOp): PythonOp.spec().
using PythonOpSpec = std::tuple<std::string, std::string, int32_t, int32_t, int32_t, int32_t, int32_t,
                                nanobind::object>;

// Adds the libraries and the Python ops to `options`; the caller releases `options` on failure.
nee_status_t AddCustomOps(nee_session_options_t* options, const std::vector<std::string>& libraries,
                          const std::vector<PythonOpSpec>& ops);

}  // namespace nee_python
