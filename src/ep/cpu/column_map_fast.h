// ai.nee TransposeColumnMap on float32 (column_map_fast.cc): a detector head's
// decode in one pass; registered in cpu_kernels.cc's table.
#pragma once
#include "ops/op_schema.h"

namespace nee::cpu {

Status TransposeColumnMapFloat(KernelContext& ctx);

}  // namespace nee::cpu
