// The `nee` command line: `nee run`, `nee inspect`, `nee optimize` (here),
// `nee bench` (bench_command.cc), `nee meta` (meta_command.cc), `nee bom`
// (bom_command.cc), `nee ops` (ops_command.cc) and `nee check`
// (check_command.cc). Argument handling and printing only; run, inspect,
// optimize and bench go through the public C/C++ API.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "format/lineage.h"
#include "nee/nee.hpp"
#include "tools/cli_common.h"

namespace fs = std::filesystem;

namespace nee_cli {

constexpr int kExitBadInput = 1;
constexpr int kExitUsage = 2;
constexpr int kExitRuntime = 3;

const char kUsage[] =
    "usage:\n"
    "  nee run MODEL [--input NAME=FILE]... [--inputs-dir DIR] [--random] [--dim SYMBOL=SIZE]...\n"
    "              [--output-dir DIR] [--output-format npy|pb] [--threads N] [--opt-level L]\n"
    "              [--expect NAME=FILE]... [--timeout SECONDS] [--memory-limit SIZE] [--profile PREFIX]\n"
    "              [--repeat N] [--limit NAME=VALUE]... [--sandbox] [--custom-ops LIB]...\n"
    "  nee inspect MODEL [--plan] [--dim SYMBOL=SIZE]... [--opt-level L] [--custom-ops LIB]...\n"
    "  nee optimize MODEL -o OUT.onnx [--opt-level L]\n"
    "  nee bench MODEL [--threads N] [--runs N] [--warmup N] [--batch N] [--dim SYMBOL=SIZE]... [--opt-level L]\n"
    "              [--input NAME=FILE]... [--inputs-dir DIR]\n"
    "  nee meta MODEL [--verify | [--set KEY=VALUE]... [--delete KEY]... [--producer-name S] [--producer-version S]\n"
    "              [--domain S] [--model-version N] [--doc-string S] -o OUT.onnx]\n"
    "  nee bom MODEL [-o FILE]\n"
    "  nee check MODEL [--custom-ops LIB]...\n"
    "  nee convert MODEL --opset N -o OUT.onnx\n"
    "  nee quantize MODEL -o OUT.onnx --mode dynamic|fp16|bf16 [--exclude NODE]... [--per-channel] [--reduce-range]\n"
    "  nee quantize MODEL -o OUT.onnx --mode static --calibration DIR\n"
    "              [--calibrator minmax|percentile|entropy] [--percentile P] [--per-channel]\n"
    "              [--reduce-range] [--symmetric-activations] [--exclude NODE]...\n"
    "  nee quantize MODEL -o OUT.onnx --mode int4 [--block-size 32|64|128] [--exclude NODE]...\n"
    "  nee precision MODEL (--against REF_MODEL | --variant int8|fp16|bf16|int4) [--fp64] [--inputs DIR] [--input NAME=FILE]...\n"
    "              [--random N] [--dim SYMBOL=SIZE]... [--max-top1-drop PCT] [--max-abs X] [--json OUT.json] [--threads N]\n"
    "              [--seed N] [--no-layers]\n"
    "  nee ops [--domain D] [--format md|json]\n"
    "  nee profile MODEL [--runs N] [--profile PREFIX] [--input NAME=FILE]... [--inputs-dir DIR] [--dim SYMBOL=SIZE]...\n"
    "              [--threads N] [--opt-level L] [--timeout SECONDS] [--memory-limit SIZE] [--limit NAME=VALUE]...\n"
    "\n"
    "Inputs are .npy or ONNX .pb files (TensorProto, SequenceProto, OptionalProto). --inputs-dir reads\n"
    "input_0.pb, input_1.pb, ... in graph-input order. --random fills inputs not given with random values\n"
    "(symbolic dims are 1 unless set with --dim). Outputs are written as output_<i>.<ext>.\n"
    "--expect compares an output with a reference file and prints how many elements agree.\n"
    "--timeout stops the run (exit status 3) once it has taken SECONDS; --memory-limit caps the bytes of\n"
    "tensors the run holds at once (SIZE like 512M or 2G; default: the machine's physical memory).\n"
    "--profile times every node: prints the time per op type and writes a Chrome trace to\n"
    "PREFIX_<date>_<time>.json (open it in chrome://tracing or Perfetto). --repeat runs the model N more\n"
    "times after the first and prints their median time (the first run also prepares kernels).\n"
    "nee bench times --runs runs (default 20) after --warmup runs (default 3) on the inputs given (--input,\n"
    "--inputs-dir, as nee run reads them) and random values of the declared types for the rest (--batch sets\n"
    "symbolic first dims, --dim any symbol; integers in [0, 10), which may be out of range for an index such as\n"
    "BERT's token types: give that input) and prints latency percentiles, throughput, session-creation time and\n"
    "peak memory.\n"
    "nee check validates the model and prints its opsets, the inferred type and shape of every value and\n"
    "every problem, naming the node (exit status 0 when valid, 1 when not). nee ops prints the operators\n"
    "this build runs, per domain and opset, with the CPU kernels for each (docs/operators.md).\n"
    "nee convert rewrites the model for another default-domain opset (up, or down where the spec allows),\n"
    "checks it and appends a lineage record; a node it cannot convert is named and nothing is written.\n"
    "nee quantize writes a lower-precision model ONNX Runtime also runs (docs/quantization.md): dynamic\n"
    "quantizes MatMul/Gemm weights to int8 (symmetric; --per-channel: a scale per output column;\n"
    "--reduce-range: 7 bits, for u8s8 kernels that saturate without VNNI) with activations quantized at run\n"
    "time; fp16 (bf16) computes in float16 (bfloat16) with float32 inputs and outputs. --exclude keeps a node as it is.\n"
    "static writes Conv/MatMul/Gemm in QDQ form (uint8 activations from ranges calibrated on DIR, int8\n"
    "weights, int32 biases): DIR holds one folder per sample with, for each graph input NAME (index i),\n"
    "NAME.npy, NAME.pb, input_<i>.pb or input_<i>.npy; --calibrator minmax (default), percentile\n"
    "(--percentile P, default 99.999, of the values; of |x| with --symmetric-activations) or entropy\n"
    "(the KL-divergence threshold over a 2048-bin histogram of |x|, TensorRT's method); --reduce-range:\n"
    "7-bit weights, which nee's int8 convolution kernel takes without remainders.\n"
    "int4 rewrites MatMuls by constant weights into com.microsoft MatMulNBits: 4-bit weights with a scale\n"
    "and a zero point per --block-size (default 32) weights along K; activations stay float32.\n"
    "nee precision runs MODEL and REF_MODEL on the same inputs (--inputs DIR: input_<i>.pb/.npy or <name>.npy,\n"
    "or subfolders of them, one sample each; else --random N samples, default 8) and prints, per output and\n"
    "per float intermediate value both compute (docs/precision.md), max abs error, max relative error\n"
    "|a-r| / max(|r|, 1e-6 * max|r| of the tensor), ULP distance (float32 bits; float16/bfloat16 compared in\n"
    "float32), cosine similarity, RMS error and top-1 agreement over the last axis; --max-top1-drop PCT\n"
    "(100 - agreement, in percent) and --max-abs X gate the outputs (exit status 4 when one fails).\n"
    "--variant compares MODEL (the reference) with the model nee quantize --mode dynamic|fp16 makes of it.\n"
    "nee profile runs the model --runs times (default 20; random inputs where none are given) with\n"
    "profiling on, prints the time per operator type and writes the trace (PREFIX default nee_profile).\n"
    "--limit bounds what the model may make nee do (docs/SECURITY.md; 0 turns one off): nodes,\n"
    "subgraph-depth, tensor-bytes, external-data (bytes, all tensors), session-memory (SIZE like 2G).\n"
    "--sandbox loads and runs the model in a child process under seccomp and resource limits (no new\n"
    "files, sockets or processes; address space and CPU time bounded by --memory-limit and --timeout).\n"
    "--custom-ops loads a custom-op library (include/nee/custom_op.h; repeatable) whose ops the model uses.\n";

bool SplitPair(const std::string& arg, std::string* key, std::string* value) {
  size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  *key = arg.substr(0, eq);
  *value = arg.substr(eq + 1);
  return true;
}

// The number `text` starts with (-1 if none); what follows it goes to *rest.
double LeadingNumber(const std::string& text, std::string* rest) {
  size_t used = 0;
  try {
    double number = std::stod(text, &used);
    *rest = text.substr(used);
    return number;
  } catch (...) {
    return -1;
  }
}

// "1.5" seconds -> 1500 ms.
int64_t ParseSeconds(const std::string& text) {
  std::string rest;
  double seconds = LeadingNumber(text, &rest);
  if (!rest.empty() || !(seconds > 0) || seconds > 1e9)
    throw UsageError{"--timeout expects seconds > 0, got '" + text + "'"};
  return std::max<int64_t>(1, static_cast<int64_t>(seconds * 1000));
}

// "4096", "512K", "512M", "2G" -> bytes.
int64_t ParseSize(const std::string& text) {
  std::string unit;
  double number = LeadingNumber(text, &unit);
  const std::map<std::string, double> kScale = {{"", 1.0},       {"K", 0x1p10}, {"k", 0x1p10}, {"M", 0x1p20},
                                                {"m", 0x1p20},   {"G", 0x1p30}, {"g", 0x1p30}};
  auto scale = kScale.find(unit);
  if (scale == kScale.end() || !(number > 0) || number * scale->second > 9e18)
    throw UsageError{"--memory-limit expects a size such as 4096, 512M or 2G, got '" + text + "'"};
  return static_cast<int64_t>(number * scale->second);
}

int64_t ParseCount(const std::string& flag, const std::string& text, int64_t min, int64_t max) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || *end || errno == ERANGE || value < min || value > max)
    throw UsageError{flag + " expects a whole number from " + std::to_string(min) + " to " + std::to_string(max) +
                     ", got '" + text + "'"};
  return value;
}

// nee bench takes only the options that shape its runs; the bench-only
// options mean nothing to the other commands. Either mistake is reported
// rather than ignored.
void CheckApplies(const std::string& command, const std::string& arg) {
  static const char* const kBenchOptions[] = {"--threads", "--runs",  "--warmup",    "--batch",
                                              "--dim",     "--input", "--inputs-dir", "--opt-level"};
  const bool bench_option = std::find_if(std::begin(kBenchOptions), std::end(kBenchOptions),
                                         [&](const char* o) { return arg == o; }) != std::end(kBenchOptions);
  if (command == "bench" && !bench_option && arg.rfind("-", 0) == 0)
    throw UsageError{"option '" + arg + "' does not apply to nee bench"};
  static const char* const kProfileOptions[] = {"--runs", "--profile", "--input", "--inputs-dir", "--dim",
                                                "--threads", "--opt-level", "--limit", "--timeout", "--memory-limit"};
  if (command == "profile") {
    if (std::find_if(std::begin(kProfileOptions), std::end(kProfileOptions), [&](const char* o) { return arg == o; }) ==
            std::end(kProfileOptions) && arg.rfind("-", 0) == 0)
      throw UsageError{"option '" + arg + "' does not apply to nee profile"};
    return;
  }
  if (command != "bench" && (arg == "--runs" || arg == "--warmup" || arg == "--batch"))
    throw UsageError{"option '" + arg + "' applies only to nee bench"};
}

// --limit NAME=VALUE -> (nee_limit_t, value).
std::pair<int32_t, int64_t> ParseLimit(const std::string& text) {
  const std::map<std::string, int32_t> kNames = {
      {"nodes", NEE_LIMIT_GRAPH_NODES},       {"subgraph-depth", NEE_LIMIT_SUBGRAPH_DEPTH},
      {"tensor-bytes", NEE_LIMIT_TENSOR_BYTES}, {"external-data", NEE_LIMIT_EXTERNAL_DATA_BYTES},
      {"session-memory", NEE_LIMIT_SESSION_MEMORY}};
  std::string name, value;
  auto it = SplitPair(text, &name, &value) ? kNames.find(name) : kNames.end();
  if (it == kNames.end())
    throw UsageError{"--limit expects NAME=VALUE with NAME one of nodes, subgraph-depth, tensor-bytes, "
                     "external-data, session-memory; got '" + text + "'"};
  if (value == "0") return {it->second, 0};
  try {
    return {it->second, ParseSize(value)};
  } catch (const UsageError&) {
    throw UsageError{"--limit " + name + " expects a number or a size such as 512M, got '" + value + "'"};
  }
}

Args Parse(int argc, char** argv) {
  if (argc < 3) throw UsageError{"missing command or model"};
  Args a;
  a.command = argv[1];
  a.model = argv[2];
  if (a.command != "run" && a.command != "inspect" && a.command != "optimize" && a.command != "bench" &&
      a.command != "profile")
    throw UsageError{"unknown command '" + a.command + "'"};
  if (a.model.rfind("--", 0) == 0) throw UsageError{"expected a model path after '" + a.command + "', got '" + a.model + "'"};
  for (int i = 3; i < argc; ++i) {
    std::string arg = argv[i];
    CheckApplies(a.command, arg);
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError{arg + " needs a value"};
      return argv[++i];
    };
    std::string k, v;
    if (arg == "--input" || arg == "--expect" || arg == "--dim") {
      std::string pair = next();
      if (!SplitPair(pair, &k, &v)) throw UsageError{arg + " expects NAME=VALUE, got '" + pair + "'"};
      if (arg == "--input") a.inputs.emplace_back(k, v);
      else if (arg == "--expect") a.expects.emplace_back(k, v);
      else {
        try {
          a.dims[k] = std::stoll(v);
        } catch (...) {
          throw UsageError{"--dim " + pair + ": size is not a number"};
        }
        if (a.dims[k] < 0) throw UsageError{"--dim " + pair + ": size must not be negative"};
      }
    } else if (arg == "--inputs-dir") a.inputs_dir = next();
    else if (arg == "--output-dir") a.output_dir = next();
    else if (arg == "--output-format") {
      a.output_format = next();
      if (a.output_format != "npy" && a.output_format != "pb") throw UsageError{"--output-format must be npy or pb"};
    } else if (arg == "--random") a.random = true;
    else if (arg == "--sandbox") a.sandbox = true;
    else if (arg == "--plan") a.plan = true;
    else if (arg == "--profile") a.profile_prefix = next();
    else if (arg == "-o" || arg == "--output") a.output_model = next();
    else if (arg == "--repeat") {
      const std::string n = next();
      char* end = nullptr;
      const long value = std::strtol(n.c_str(), &end, 10);
      if (end == n.c_str() || *end || value < 0 || value > 1000000)
        throw UsageError{"--repeat expects a count from 0 to 1000000, got '" + n + "'"};
      a.repeat = static_cast<int>(value);
    }
    else if (arg == "--runs") a.runs = ParseCount(arg, next(), 1, 10000000);
    else if (arg == "--warmup") a.warmup = ParseCount(arg, next(), 0, 10000000);
    else if (arg == "--batch") a.batch = ParseCount(arg, next(), 1, int64_t{1} << 40);
    else if (arg == "--timeout") a.timeout_ms = ParseSeconds(next());
    else if (arg == "--memory-limit") a.memory_limit = ParseSize(next());
    else if (arg == "--limit") a.limits.push_back(ParseLimit(next()));
    else if (arg == "--custom-ops") a.custom_ops.push_back(next());
    else if (arg == "--threads" || arg == "--opt-level") {
      std::string n = next();
      int value;
      try {
        value = std::stoi(n);
      } catch (...) {
        throw UsageError{arg + " expects a number, got '" + n + "'"};
      }
      if (value < 0) throw UsageError{arg + " must not be negative"};
      (arg == "--threads" ? a.threads : a.opt_level) = value;
    } else throw UsageError{"unknown option '" + arg + "'"};
  }
  if (a.command == "optimize" && a.output_model.empty()) throw UsageError{"optimize needs -o OUT.onnx"};
  if (a.sandbox && a.command != "run") throw UsageError{"--sandbox applies only to nee run"};
  if (!a.custom_ops.empty() && a.command != "run" && a.command != "inspect")
    throw UsageError{"--custom-ops applies only to nee run and nee inspect"};
  if (a.sandbox && !a.custom_ops.empty())  // the sandbox maps no new executable code
    throw UsageError{"--custom-ops loads code, which a sandboxed run cannot; drop --sandbox or --custom-ops"};
  if (a.sandbox && !a.profile_prefix.empty())
    throw UsageError{"--profile writes a file, which a sandboxed run cannot; drop --sandbox or --profile"};
  return a;
}

std::string ShapeText(const neeapi::ValueInfo& vi) {
  if (vi.rank < 0) return "?";
  std::string s = "[";
  for (size_t d = 0; d < vi.dims.size(); ++d) {
    if (d) s += ",";
    s += vi.dims[d] >= 0 ? std::to_string(vi.dims[d]) : (vi.symbols[d].empty() ? "?" : vi.symbols[d]);
  }
  return s + "]";
}

size_t ElementSize(nee_dtype_t t) {
  switch (t) {
    case NEE_DTYPE_FLOAT64: case NEE_DTYPE_INT64: case NEE_DTYPE_UINT64: case NEE_DTYPE_COMPLEX64: return 8;
    case NEE_DTYPE_FLOAT32: case NEE_DTYPE_INT32: case NEE_DTYPE_UINT32: return 4;
    case NEE_DTYPE_FLOAT16: case NEE_DTYPE_BFLOAT16: case NEE_DTYPE_INT16: case NEE_DTYPE_UINT16: return 2;
    case NEE_DTYPE_COMPLEX128: return 16;
    default: return 1;
  }
}

// Random values of the declared type: floats in [-1, 1), integers in [0, 10), bools.
neeapi::ValuePtr RandomInput(const neeapi::ValueInfo& vi, const std::map<std::string, int64_t>& dims, std::mt19937& rng,
                             int64_t batch) {
  if (vi.rank < 0 || vi.element_type == NEE_DTYPE_UNDEFINED)
    throw neeapi::Error(NEE_STATUS_INVALID_ARGUMENT, "input '" + vi.name + "' (" + vi.type +
                                                      ") has no static tensor type, so random values cannot fill it");
  std::vector<int64_t> shape;
  int64_t count = 1;
  for (size_t d = 0; d < vi.dims.size(); ++d) {
    int64_t size = vi.dims[d];
    if (size < 0) {
      auto it = dims.find(vi.symbols[d]);
      size = it != dims.end() ? it->second : d == 0 && batch > 0 ? batch : 1;
    }
    shape.push_back(size);
    count *= size;
  }
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> small(0, 9);
  if (vi.element_type == NEE_DTYPE_STRING) {
    std::vector<std::string> strings(count);
    std::vector<const char*> ptrs;
    std::vector<size_t> lens;
    for (auto& s : strings) {
      s = "s" + std::to_string(small(rng));
      ptrs.push_back(s.c_str());
      lens.push_back(s.size());
    }
    nee_value_t* v = nullptr;
    neeapi::Check(nee_value_create_string_tensor(shape.data(), shape.size(), ptrs.data(), lens.data(), &v));
    return neeapi::ValuePtr(v);
  }
  size_t elem = ElementSize(vi.element_type);
  std::vector<uint8_t> bytes(count * elem);
  for (int64_t i = 0; i < count; ++i) {
    uint8_t* p = bytes.data() + i * elem;
    switch (vi.element_type) {
      case NEE_DTYPE_FLOAT32: { float f = static_cast<float>(real(rng)); std::memcpy(p, &f, 4); break; }
      case NEE_DTYPE_FLOAT64: { double f = real(rng); std::memcpy(p, &f, 8); break; }
      case NEE_DTYPE_INT64: { int64_t x = small(rng); std::memcpy(p, &x, 8); break; }
      case NEE_DTYPE_INT32: { int32_t x = small(rng); std::memcpy(p, &x, 4); break; }
      case NEE_DTYPE_BOOL: *p = small(rng) & 1; break;
      case NEE_DTYPE_FLOAT16: { uint16_t h = 0x3c00; std::memcpy(p, &h, 2); break; }  // 1.0
      default: *p = static_cast<uint8_t>(small(rng)); break;
    }
  }
  nee_value_t* v = nullptr;
  neeapi::Check(nee_value_create_tensor(vi.element_type, shape.data(), shape.size(), bytes.data(), bytes.size(), &v));
  return neeapi::ValuePtr(v);
}

Feed GatherInputs(const Args& a, const neeapi::Session& session) {
  Feed feed;
  auto inputs = session.Inputs();
  for (const auto& [name, file] : a.inputs) {
    size_t index = 0;
    while (index < inputs.size() && inputs[index].name != name) ++index;
    feed.names.push_back(name);
    // Unknown names are reported by Run with the list of valid inputs.
    feed.values.push_back(index < inputs.size() ? session.LoadInput(index, file) : neeapi::LoadValue(file));
  }
  if (!a.inputs_dir.empty()) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      fs::path p = fs::path(a.inputs_dir) / ("input_" + std::to_string(i) + ".pb");
      if (!fs::exists(p)) {
        fs::path npy = fs::path(a.inputs_dir) / ("input_" + std::to_string(i) + ".npy");
        if (!fs::exists(npy)) break;
        p = npy;
      }
      bool given = false;
      for (const auto& n : feed.names) given = given || n == inputs[i].name;
      if (given) continue;
      feed.names.push_back(inputs[i].name);
      feed.values.push_back(session.LoadInput(i, p.string()));
    }
  }
  std::mt19937 rng(12345);
  for (const auto& vi : inputs) {
    bool given = false;
    for (const auto& n : feed.names) given = given || n == vi.name;
    if (given) continue;
    if (!a.random && !a.plan)
      throw neeapi::Error(NEE_STATUS_INVALID_ARGUMENT, "input '" + vi.name + "' (" + vi.type + ShapeText(vi) +
                                                        ") was not given; use --input, --inputs-dir or --random");
    feed.names.push_back(vi.name);
    feed.values.push_back(RandomInput(vi, a.dims, rng, a.batch));
  }
  return feed;
}

// Prints how many elements of `actual` equal `expected` (exactly for
// integers, within 1e-4 relative for floats) and the largest difference.
void CompareWithExpected(const std::string& name, const nee_value_t* actual, const std::string& file) {
  neeapi::ValuePtr expected = neeapi::LoadValue(file);
  if (nee_value_kind(actual) != NEE_VALUE_TENSOR || nee_value_kind(expected.get()) != NEE_VALUE_TENSOR)
    throw neeapi::Error(NEE_STATUS_INVALID_ARGUMENT, "--expect " + name + ": only tensors can be compared");
  int64_t n = nee_value_element_count(actual);
  if (n != nee_value_element_count(expected.get()))
    throw neeapi::Error(NEE_STATUS_INVALID_ARGUMENT, "--expect " + name + ": " + neeapi::Describe(actual) + " vs expected " +
                                                      neeapi::Describe(expected.get()));
  auto read = [](const nee_value_t* v, int64_t i) -> double {
    const void* d = nee_value_data(v);
    switch (nee_value_dtype(v)) {
      case NEE_DTYPE_FLOAT32: return static_cast<const float*>(d)[i];
      case NEE_DTYPE_FLOAT64: return static_cast<const double*>(d)[i];
      case NEE_DTYPE_INT64: return static_cast<double>(static_cast<const int64_t*>(d)[i]);
      case NEE_DTYPE_INT32: return static_cast<const int32_t*>(d)[i];
      case NEE_DTYPE_UINT8: case NEE_DTYPE_BOOL: return static_cast<const uint8_t*>(d)[i];
      case NEE_DTYPE_INT8: return static_cast<const int8_t*>(d)[i];
      default: throw neeapi::Error(NEE_STATUS_NOT_IMPLEMENTED, "--expect: unsupported element type");
    }
  };
  int64_t agree = 0;
  double max_diff = 0;
  for (int64_t i = 0; i < n; ++i) {
    double x = read(actual, i), y = read(expected.get(), i);
    double diff = std::abs(x - y);
    max_diff = std::max(max_diff, diff);
    if (diff <= 1e-4 * std::max(1.0, std::abs(y))) ++agree;
  }
  std::printf("  check %s against %s: %lld of %lld elements agree (%.2f%%), max abs difference %.3g\n", name.c_str(),
              file.c_str(), static_cast<long long>(agree), static_cast<long long>(n),
              n ? 100.0 * agree / n : 100.0, max_diff);
}

// The first few elements of a numeric tensor, e.g. "[2, 0, 4, 9, ...]".
std::string Preview(const nee_value_t* v, int64_t max_items = 8) {
  if (nee_value_kind(v) != NEE_VALUE_TENSOR) return "";
  int64_t n = nee_value_element_count(v);
  const void* d = nee_value_data(v);
  std::string s = "[";
  for (int64_t i = 0; i < n && i < max_items; ++i) {
    char buf[32];
    switch (nee_value_dtype(v)) {
      case NEE_DTYPE_FLOAT32: std::snprintf(buf, sizeof buf, "%.4g", static_cast<const float*>(d)[i]); break;
      case NEE_DTYPE_FLOAT64: std::snprintf(buf, sizeof buf, "%.4g", static_cast<const double*>(d)[i]); break;
      case NEE_DTYPE_INT64: std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(static_cast<const int64_t*>(d)[i])); break;
      case NEE_DTYPE_INT32: std::snprintf(buf, sizeof buf, "%d", static_cast<const int32_t*>(d)[i]); break;
      case NEE_DTYPE_BOOL: std::snprintf(buf, sizeof buf, "%s", static_cast<const uint8_t*>(d)[i] ? "true" : "false"); break;
      default: return "";
    }
    s += (i ? ", " : "") + std::string(buf);
  }
  return s + (n > max_items ? ", ...]" : "]");
}

RunOutcome ComputeRun(const Args& a, const std::function<void()>& before_run) {
  neeapi::SessionOptions options;
  options.SetIntraOpThreads(a.threads).SetOptimizationLevel(a.opt_level < 0 ? 99 : a.opt_level);
  options.SetRunTimeoutMs(a.timeout_ms).SetRunMemoryLimit(a.memory_limit);
  if (!a.profile_prefix.empty()) options.SetProfiling(a.profile_prefix);
  for (const auto& [limit, value] : a.limits) options.SetLimit(limit, value);
  for (const std::string& library : a.custom_ops) options.AddCustomOpsLibrary(library);
  neeapi::Session session(a.model, options);
  Feed feed = GatherInputs(a, session);
  if (before_run) before_run();
  RunOutcome r;
  auto start = std::chrono::steady_clock::now();
  r.outputs = session.Run(feed.names, feed.View());
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (const auto& info : session.Outputs()) r.names.push_back(info.name);
  if (a.repeat > 0) {
    std::vector<double> times;
    for (int k = 0; k < a.repeat; ++k) {
      auto t0 = std::chrono::steady_clock::now();
      session.Run(feed.names, feed.View());
      times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(times.begin(), times.end());
    char line[160];
    std::snprintf(line, sizeof line, "%d more runs: median %.3f ms, fastest %.3f ms\n", a.repeat,
                  times[times.size() / 2], times.front());
    r.notes += line;
  }
  if (!a.profile_prefix.empty()) {
    r.notes += "time per op type:\n" + session.ProfileSummary();
    r.notes += "profile written to " + session.EndProfiling() + "\n";
  }
  return r;
}

int Run(const Args& a) {
  RunOutcome r = a.sandbox ? ComputeRunSandboxed(a) : ComputeRun(a, nullptr);
  const auto& outputs = r.outputs;
  if (!a.output_dir.empty()) fs::create_directories(a.output_dir);
  std::printf("ran %s in %.3f ms\n", a.model.c_str(), r.ms);
  std::printf("%s", r.notes.c_str());
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string preview = Preview(outputs[i].get());
    std::printf("  output %zu '%s': %s%s%s\n", i, r.names[i].c_str(), neeapi::Describe(outputs[i].get()).c_str(),
                preview.empty() ? "" : " = ", preview.c_str());
    if (!a.output_dir.empty()) {
      // .npy holds tensors only: sequences, maps and optionals go to .pb (SequenceProto, ...).
      bool tensor = nee_value_kind(outputs[i].get()) == NEE_VALUE_TENSOR;
      std::string ext = tensor ? a.output_format : "pb";
      fs::path p = fs::path(a.output_dir) / ("output_" + std::to_string(i) + "." + ext);
      neeapi::Check(nee_value_save_file(outputs[i].get(), p.string().c_str()));
      std::printf("    written to %s\n", p.string().c_str());
    }
  }
  for (const auto& [name, file] : a.expects) {
    size_t i = 0;
    while (i < r.names.size() && r.names[i] != name) ++i;
    if (i == r.names.size()) throw neeapi::Error(NEE_STATUS_INVALID_ARGUMENT, "--expect: no output named '" + name + "'");
    CompareWithExpected(name, outputs[i].get(), file);
  }
  return 0;
}

std::string HumanBytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (b >= 1024 && u < 3) { b /= 1024; ++u; }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", b, units[u]);
  return buf;
}

int Inspect(const Args& a) {
  neeapi::SessionOptions options;
  // The model as written, unless a level is asked for (to see what the optimizer made of it).
  options.SetOptimizationLevel(a.opt_level < 0 ? 0 : a.opt_level);
  for (const std::string& library : a.custom_ops) options.AddCustomOpsLibrary(library);
  neeapi::Session session(a.model, options);
  const nee_session_t* s = session.get();
  std::printf("model:      %s\n", a.model.c_str());
  std::printf("producer:   %s %s\n", session.Metadata("producer_name").c_str(), session.Metadata("producer_version").c_str());
  std::printf("ir version: %s\n", session.Metadata("ir_version").c_str());
  std::printf("opsets:     %s\n", session.Metadata("opsets").c_str());
  std::string domain = session.Metadata("domain"), doc = session.Metadata("doc_string");
  if (!domain.empty()) std::printf("domain:     %s\n", domain.c_str());
  std::printf("model version: %s\n", session.Metadata("model_version").c_str());
  if (!doc.empty()) std::printf("doc:        %s\n", doc.c_str());
  std::printf("graph:      %s\n", session.Metadata("graph_name").c_str());
  std::printf("inputs:\n");
  for (const auto& vi : session.Inputs()) std::printf("  %s: %s %s\n", vi.name.c_str(), vi.type.c_str(), ShapeText(vi).c_str());
  std::printf("outputs:\n");
  for (const auto& vi : session.Outputs()) std::printf("  %s: %s %s\n", vi.name.c_str(), vi.type.c_str(), ShapeText(vi).c_str());
  size_t n_meta = nee_session_custom_metadata_count(s);
  std::vector<std::pair<std::string, std::string>> props;
  for (size_t i = 0; i < n_meta; ++i) {
    std::string key = nee_session_custom_metadata_key(s, i);
    props.emplace_back(key, session.Metadata("custom:" + key));
  }
  bool lineage_only = true;  // lineage records are shown as a chain below
  for (const auto& [key, value] : props) lineage_only = lineage_only && nee::IsLineageKey(key);
  if (!lineage_only) {
    std::printf("metadata:\n");
    for (const auto& [key, value] : props)
      if (!nee::IsLineageKey(key)) std::printf("  %s = %s\n", key.c_str(), value.c_str());
  }
  PrintLineage(props);
  nee_model_stats_t stats;
  neeapi::Check(nee_session_model_stats(s, &stats));
  std::printf("nodes:      %zu\n", stats.node_count);
  std::printf("parameters: %lld in %zu initializers (%s)\n", static_cast<long long>(stats.parameter_count),
              stats.initializer_count, HumanBytes(static_cast<double>(stats.parameter_bytes)).c_str());
  std::printf("ops:\n");
  for (size_t i = 0; i < nee_session_op_type_count(s); ++i) {
    const char* op;
    size_t count;
    neeapi::Check(nee_session_op_type_at(s, i, &op, &count));
    std::printf("  %-28s %zu\n", op, count);
  }
  if (a.plan) {
    Args with_random = a;
    with_random.random = true;
    Feed feed = GatherInputs(with_random, session);
    nee_plan_report_t r = session.PlanReport(feed.names, feed.View());
    std::printf("memory plan (symbolic dims = 1 unless --dim):\n");
    std::printf("  values:             %zu (%zu planned in the arena)\n", r.value_count, r.planned_value_count);
    std::printf("  intermediates sum:  %s\n", HumanBytes(static_cast<double>(r.planned_bytes)).c_str());
    std::printf("  arena size:         %s (%.1f%% of the sum)\n", HumanBytes(static_cast<double>(r.arena_bytes)).c_str(),
                r.planned_bytes ? 100.0 * r.arena_bytes / r.planned_bytes : 100.0);
  }
  return 0;
}

// nee optimize IN -o OUT [--opt-level L]: the model optimized once, as ONNX.
int Optimize(const Args& a) {
  const int level = a.opt_level < 0 ? 99 : a.opt_level;
  std::string report(1 << 16, '\0');
  size_t length = 0;
  neeapi::Check(nee_model_optimize_file(a.model.c_str(), a.output_model.c_str(), level, report.data(), report.size(),
                                        &length));
  report.resize(std::min(length, report.size() - 1));
  std::printf("%s", report.c_str());
  std::printf("written to %s (level %d; nee loads it without optimizing again)\n", a.output_model.c_str(), level);
  return 0;
}

}  // namespace nee_cli

int main(int argc, char** argv) {
  using namespace nee_cli;
  try {
    const std::string command = argc > 1 ? argv[1] : "";
    if (command == "--help" || command == "-h" || command == "help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (command == "--version") {
      std::printf("nee %s\n", nee_version());
      return 0;
    }
    if (command == "meta") return Meta(argc, argv);
    if (command == "bom") return Bom(argc, argv);
    if (command == "ops") return Ops(argc, argv);
    if (command == "check") return Check(argc, argv);
    if (command == "convert") return Convert(argc, argv);
    if (command == "quantize") return Quantize(argc, argv);
    if (command == "precision") return Precision(argc, argv);
    Args a = Parse(argc, argv);
    if (a.command == "optimize") return Optimize(a);
    if (a.command == "bench") return Bench(a);
    if (a.command == "profile") return Profile(a);
    return a.command == "run" ? Run(a) : Inspect(a);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "nee: %s\n\n%s", e.message.c_str(), kUsage);
    return kExitUsage;
  } catch (const neeapi::Error& e) {
    std::fprintf(stderr, "nee: error: %s\n", e.what());
    bool bad_input = e.code() == NEE_STATUS_INVALID_MODEL || e.code() == NEE_STATUS_INVALID_ARGUMENT ||
                     e.code() == NEE_STATUS_IO_ERROR || e.code() == NEE_STATUS_NOT_IMPLEMENTED;
    return bad_input ? kExitBadInput : kExitRuntime;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nee: error: %s\n", e.what());
    return kExitRuntime;
  }
}
