// numpy .npy files (format versions 1.0, 2.0 and 3.0): little-endian, C order;
// dtypes float16/32/64, complex64/128, int8-64, uint8-64, bool and fixed-width strings ('U', 'S';
// string tensors are written as '<U<n>', or '|S<n>' when not valid UTF-8).
// Fortran-ordered and big-endian arrays are refused with an error.
#pragma once
#include <string>

#include "base/mapped_file.h"
#include "base/status.h"
#include "ir/tensor.h"

namespace nee {

Result<Tensor> ReadNpyFile(const std::string& path);
// The same from bytes in memory; the tensor may view `bytes`.
Result<Tensor> ReadNpyBytes(std::shared_ptr<MappedFile> bytes);
// Writes the header exactly as numpy.save does, so the file matches numpy's.
Status WriteNpyFile(const Tensor& tensor, const std::string& path);
Result<std::string> SerializeNpy(const Tensor& tensor);

}  // namespace nee
