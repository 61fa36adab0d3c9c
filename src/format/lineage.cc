#include "format/lineage.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <ctime>

#include "base/sha256.h"

#ifndef NEE_VERSION_STRING
#define NEE_VERSION_STRING "unknown"
#endif

namespace nee {

namespace {

void HashU64(Sha256& hash, uint64_t value) {
  uint8_t bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(value >> (8 * i));
  hash.Update(bytes, sizeof bytes);
}

void HashBytes(Sha256& hash, const void* data, size_t size) {
  HashU64(hash, size);
  if (size > 0) hash.Update(data, size);
}

std::string BaseName(const std::string& path) { return std::filesystem::path(path).filename().string(); }

bool IsSha256Hex(const std::string& s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// N of "nee.lineage.N", or -1.
int64_t LineageIndex(const std::string& key) {
  const std::string digits = key.substr(std::char_traits<char>::length(kLineageKeyPrefix));
  if (digits.empty() || digits.size() > 9 || digits[0] == '0') return -1;
  for (char c : digits)
    if (c < '0' || c > '9') return -1;
  return std::stoll(digits);
}

// "a=1, b=x" from a parameters object (values in JSON, strings bare).
std::string ParameterText(const Json* parameters) {
  if (!parameters || !parameters->is_object()) return "";
  std::string out;
  for (const auto& [name, value] : parameters->members()) {
    if (!out.empty()) out += ", ";
    out += name + "=" + (value.is_string() ? value.string() : value.Serialize());
  }
  return out;
}

}  // namespace

bool IsLineageKey(const std::string& key) { return key.rfind(kLineageKeyPrefix, 0) == 0; }

std::string WeightsSha256(const Graph& graph) {
  Sha256 hash;
  for (const Initializer& init : graph.initializers) {
    const Tensor& t = init.tensor;
    HashBytes(hash, init.name.data(), init.name.size());
    HashU64(hash, static_cast<uint64_t>(t.dtype()));
    HashU64(hash, t.dims().size());
    for (int64_t d : t.dims()) HashU64(hash, static_cast<uint64_t>(d));
    if (t.dtype() == DataType::kString) {
      // Length of the framed elements, then the elements.
      uint64_t total = 0;
      for (const std::string& s : t.span<std::string>()) total += 8 + s.size();
      HashU64(hash, total);
      for (const std::string& s : t.span<std::string>()) HashBytes(hash, s.data(), s.size());
    } else {
      HashBytes(hash, t.raw_data(), t.byte_size());
    }
  }
  return hash.HexFinal();
}

std::string LineageRecord::Field(const char* section, const char* name) const {
  const Json* part = json.Find(section);
  return part && part->is_object() ? part->StringAt(name) : std::string();
}

std::string LineageRecord::Summary() const {
  if (!error.empty()) return "unreadable: " + error;
  std::string params = ParameterText(json.Find("parameters"));
  return json.StringAt("action") + (params.empty() ? "" : " (" + params + ")") + " by " + json.StringAt("tool") + " " +
         json.StringAt("version") + " at " + json.StringAt("time");
}

std::vector<LineageRecord> ReadLineage(const std::vector<std::pair<std::string, std::string>>& props) {
  std::vector<LineageRecord> records;
  for (const auto& [key, value] : props) {
    if (!IsLineageKey(key)) continue;
    LineageRecord r;
    r.key = key;
    r.index = LineageIndex(key);
    Result<Json> parsed = Json::Parse(value);
    if (r.index < 0) r.error = "the key is not numbered like nee.lineage.1";
    else if (!parsed.ok()) r.error = parsed.status().message();
    else if (!parsed->is_object()) r.error = "the value is not a JSON object";
    if (parsed.ok()) r.json = std::move(parsed).value();
    records.push_back(std::move(r));
  }
  std::stable_sort(records.begin(), records.end(), [](const LineageRecord& a, const LineageRecord& b) {
    if ((a.index < 0) != (b.index < 0)) return b.index < 0;
    return a.index < 0 ? a.key < b.key : a.index < b.index;
  });
  return records;
}

std::string UtcTimestamp() {
  std::time_t now = std::time(nullptr);
  if (const char* epoch = std::getenv("SOURCE_DATE_EPOCH")) {
    char* end = nullptr;
    long long value = std::strtoll(epoch, &end, 10);
    if (end != epoch && *end == '\0' && value >= 0) now = static_cast<std::time_t>(value);
  }
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

Result<LineageRecorder> LineageRecorder::Begin(const std::string& path, const Model& model) {
  LineageRecorder recorder;
  recorder.input_file_ = BaseName(path);
  NEE_ASSIGN_OR_RETURN(recorder.input_sha256_, Sha256OfFile(path));
  recorder.input_weights_sha256_ = WeightsSha256(model.graph);
  return recorder;
}

Status LineageRecorder::Append(Model& out, const std::string& action, Json parameters) const {
  if (!parameters.is_object()) return InvalidArgument("lineage record '" + action + "': parameters must be an object");
  int64_t next = 1;
  for (const LineageRecord& r : ReadLineage(out.metadata_props)) next = std::max(next, r.index + 1);
  Json input = Json::Object();
  input.Set("file", input_file_).Set("sha256", input_sha256_).Set("weights_sha256", input_weights_sha256_);
  Json output = Json::Object();
  output.Set("weights_sha256", WeightsSha256(out.graph));
  Json record = Json::Object();
  record.Set("tool", "nee")
      .Set("version", NEE_VERSION_STRING)
      .Set("action", action)
      .Set("parameters", std::move(parameters))
      .Set("input", std::move(input))
      .Set("output", std::move(output))
      .Set("weights_digest", kWeightsDigestName)
      .Set("time", UtcTimestamp());
  out.metadata_props.emplace_back(kLineageKeyPrefix + std::to_string(next), record.Serialize());
  return Status::Ok();
}

std::vector<LineageCheck> VerifyLineage(const Model& model) {
  const std::vector<LineageRecord> records = ReadLineage(model.metadata_props);
  std::vector<LineageCheck> checks;
  for (size_t i = 0; i < records.size(); ++i) {
    const LineageRecord& r = records[i];
    LineageCheck check;
    check.key = r.key;
    const std::string recorded = r.Field("output", "weights_sha256");
    if (!r.error.empty()) {
      check.message = "unreadable record: " + r.error;
    } else if (r.json.StringAt("weights_digest") != kWeightsDigestName) {
      check.message = "unknown weights digest '" + r.json.StringAt("weights_digest") + "' (nee knows " +
                      kWeightsDigestName + ")";
    } else if (!IsSha256Hex(recorded)) {
      check.message = "output.weights_sha256 is missing or not a SHA-256 hex digest";
    } else if (i + 1 == records.size()) {
      const std::string actual = WeightsSha256(model.graph);
      check.ok = actual == recorded;
      check.message = check.ok ? "this model's weights hash to the recorded output " + recorded
                               : "this model's weights hash to " + actual + ", the record says " + recorded +
                                     " (the weights changed after this step)";
    } else {
      const std::string next_input = records[i + 1].Field("input", "weights_sha256");
      check.ok = next_input == recorded;
      check.message = check.ok ? "output weights " + recorded + " are the input of " + records[i + 1].key
                               : "output weights " + recorded + " but " + records[i + 1].key + " started from " +
                                     (next_input.empty() ? "unrecorded weights" : next_input) +
                                     " (the weights changed between the two steps)";
    }
    const std::string input_sha = r.Field("input", "sha256");
    if (!input_sha.empty())
      check.message += "; input file " + r.Field("input", "file") + " sha256 " + input_sha + " (not at hand, not checked)";
    checks.push_back(std::move(check));
  }
  return checks;
}

}  // namespace nee
