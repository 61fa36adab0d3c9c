// Runs a model through the installed nee's C++ wrapper (nee/nee.hpp, header
// only over the C API, which is all libnee.so exports):
//   consumer_cpp MODEL INPUT.npy
// prints the model's inputs and outputs and the first output's value.
#include <cstdio>

#include "nee/nee.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s MODEL INPUT.npy\n", argv[0]);
    return 2;
  }
  try {
    nee::api::SessionOptions options;
    options.SetReferenceKernelsOnly(false);
    nee::api::Session session(argv[1], options);
    for (const auto& in : session.Inputs()) std::printf("input %s: %s\n", in.name.c_str(), in.type.c_str());
    for (const auto& out : session.Outputs()) std::printf("output %s: %s\n", out.name.c_str(), out.type.c_str());
    nee::api::ValuePtr x = session.LoadInput(0, argv[2]);
    std::vector<nee::api::ValuePtr> outputs = session.Run({session.Inputs()[0].name}, {x.get()});
    std::printf("%s = %s\n", session.Outputs()[0].name.c_str(), nee::api::Describe(outputs[0].get()).c_str());
  } catch (const nee::api::Error& e) {
    std::fprintf(stderr, "nee error %d: %s\n", static_cast<int>(e.code()), e.what());
    return 1;
  }
  return 0;
}
