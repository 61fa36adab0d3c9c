// The C API: converts between C handles and the engine's C++ objects and
// turns every failure into a nee_status_t. No logic lives here.
//
// This file: status accessors and sessions (creation, what they describe,
// running, profiling, metadata). Values are in c_api_value.cc, session and
// run options in c_api_options.cc, the model file tools in
// c_api_model_tools.cc; their shared helpers in c_api_util.h.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/model_overrides.h"
#include "exec/session.h"
#include "format/onnx_reader.h"
#include "nee/nee.h"

#include "api/c_api_internal.h"
#include "api/sandboxed_session.h"

#include "api/c_api_util.h"

using namespace nee::c_api_util;  // NOLINT: the helpers every file of the C API uses

namespace {

std::vector<nee::NamedValue> NamedInputs(const char* const* names, const nee_value_t* const* inputs, size_t count,
                                         nee_status_t* error) {
  std::vector<nee::NamedValue> feed;
  for (size_t i = 0; i < count; ++i) {
    if (!names || !names[i] || !inputs || !inputs[i]) {
      *error = NullArg("an input name or value");
      return {};
    }
    feed.push_back({names[i], inputs[i]->value});
  }
  return feed;
}

}  // namespace

extern "C" {

nee_status_code_t nee_status_code(nee_status_t status) { return status ? status->code : NEE_STATUS_OK; }
const char* nee_status_message(nee_status_t status) { return status ? status->message.c_str() : ""; }
void nee_status_free(nee_status_t status) { delete status; }

const char* nee_dtype_name(nee_dtype_t dtype) { return nee::DataTypeName(static_cast<nee::DataType>(dtype)); }
const char* nee_version(void) { return "0.1.0"; }

// Walks the graph and its subgraphs for nee_session_model_stats and the op histogram.
static void CountGraph(const nee::Graph& g, std::map<std::string, size_t>& ops, nee_model_stats_t& stats) {
  stats.node_count += g.nodes.size();
  stats.initializer_count += g.initializers.size();
  for (const auto& init : g.initializers) {
    stats.parameter_count += init.tensor.num_elements();
    stats.parameter_bytes += static_cast<int64_t>(init.tensor.byte_size());
  }
  for (const auto& n : g.nodes) {
    ++ops[(n.domain.empty() ? "" : n.domain + ".") + n.op_type];
    for (const auto& a : n.attributes) {
      if (a.g) CountGraph(*a.g, ops, stats);
      for (const auto& sg : a.graphs)
        if (sg) CountGraph(*sg, ops, stats);
    }
  }
}

static void CountModel(const nee::Graph& g, nee_session_impl& s) {
  std::map<std::string, size_t> ops;
  CountGraph(g, ops, s.stats);
  s.op_histogram.assign(ops.begin(), ops.end());
}

static nee::Result<std::unique_ptr<nee::Session>> CreateWithOverrides(nee::Result<nee::Model> model,
                                                                      const nee::ModelOverrides& overrides,
                                                                      const nee::SessionOptions& options) {
  if (!model.ok()) return model.status();
  NEE_RETURN_IF_ERROR(nee::ApplyModelOverrides(overrides, *model));
  return nee::Session::Create(std::move(model).value(), options);
}

static nee_status_t FinishSession(nee::Result<std::unique_ptr<nee::Session>> session, nee_session_t** out_session) {
  if (!session.ok()) return MakeStatus(session.status());
  auto* s = new nee_session_impl();
  s->session = std::move(session).value();
  for (const auto& vi : s->session->inputs()) s->input_types.push_back(vi.type.ToString());
  for (const auto& vi : s->session->outputs()) s->output_types.push_back(vi.type.ToString());
  for (const auto& vi : s->session->overridable_initializers()) s->overridable_types.push_back(vi.type.ToString());
  CountModel(s->session->model().graph, *s);
  *out_session = s;
  return nullptr;
}

nee_status_t nee_session_create_from_file(const char* path, const nee_session_options_t* options,
                                          nee_session_t** out_session) {
  if (!path) return NullArg("path");
  if (!out_session) return NullArg("out_session");
  *out_session = nullptr;
  return Guard([&]() -> nee_status_t {
    if (options && options->sandbox) return nee::SandboxedSession::Create(path, nullptr, 0, *options, out_session);
    nee::SessionOptions opts = options ? options->options : nee::SessionOptions{};
    if (!options || options->overrides.empty())
      return FinishSession(nee::Session::CreateFromFile(path, opts), out_session);
    nee::ReadOptions read_options;
    read_options.external_initializers = options->overrides.external_initializers;
    nee::Result<nee::Model> model = nee::ReadModelFile(path, std::move(read_options));
    return FinishSession(CreateWithOverrides(std::move(model), options->overrides, opts), out_session);
  });
}

nee_status_t nee_session_create_from_memory(const void* data, size_t size, const nee_session_options_t* options,
                                            nee_session_t** out_session) {
  if (!data && size > 0) return NullArg("data");
  if (!out_session) return NullArg("out_session");
  *out_session = nullptr;
  return Guard([&]() -> nee_status_t {
    if (options && options->sandbox) return nee::SandboxedSession::Create(nullptr, data, size, *options, out_session);
    nee::SessionOptions opts = options ? options->options : nee::SessionOptions{};
    if (!options || options->overrides.empty())
      return FinishSession(nee::Session::CreateFromBytes(data, size, opts), out_session);
    nee::ReadOptions read_options;  // as CreateFromBytes: no folder, so external data is refused...
    read_options.external_initializers = options->overrides.external_initializers;  // ...unless supplied
    nee::Result<nee::Model> model = nee::ReadModelBytes(nee::MappedFile::FromBytes(data, size), read_options);
    return FinishSession(CreateWithOverrides(std::move(model), options->overrides, opts), out_session);
  });
}

void nee_session_release(nee_session_t* session) { delete session; }

size_t nee_session_input_count(const nee_session_t* session) { return session ? InputsOf(session).size() : 0; }
size_t nee_session_output_count(const nee_session_t* session) { return session ? OutputsOf(session).size() : 0; }

size_t nee_session_overridable_initializer_count(const nee_session_t* session) {
  return session ? OverridableOf(session).size() : 0;
}

// The list nee_session_value_info/_dim describe (NEE_LIST_*), and its type strings.
static const std::vector<nee::ValueInfo>& ListOf(const nee_session_t* session, int list,
                                                 const std::vector<std::string>** types) {
  if (list == NEE_LIST_INPUTS) {
    *types = &session->input_types;
    return InputsOf(session);
  }
  if (list == NEE_LIST_OVERRIDABLE_INITIALIZERS) {
    *types = &session->overridable_types;
    return OverridableOf(session);
  }
  *types = &session->output_types;
  return OutputsOf(session);
}

static const nee::ValueInfo* InfoAt(const nee_session_t* session, int list, size_t index) {
  if (!session) return nullptr;
  const std::vector<std::string>* types = nullptr;
  const auto& infos = ListOf(session, list, &types);
  return index < infos.size() ? &infos[index] : nullptr;
}

nee_status_t nee_session_value_info(const nee_session_t* session, int is_output, size_t index,
                                    nee_value_info_t* out_info) {
  if (!out_info) return NullArg("out_info");
  const nee::ValueInfo* vi = InfoAt(session, is_output, index);
  if (!vi) return Err(NEE_STATUS_INVALID_ARGUMENT, "input/output index out of range");
  out_info->name = vi->name.c_str();
  const std::vector<std::string>* types = nullptr;
  ListOf(session, is_output, &types);
  out_info->type = (*types)[index].c_str();
  out_info->element_type = vi->type.is_tensor() ? static_cast<nee_dtype_t>(vi->type.elem_type) : NEE_DTYPE_UNDEFINED;
  out_info->rank = vi->type.is_tensor() && vi->type.shape ? static_cast<int64_t>(vi->type.shape->size()) : -1;
  return nullptr;
}

nee_status_t nee_session_value_dim(const nee_session_t* session, int is_output, size_t index, size_t axis,
                                   int64_t* out_size, const char** out_symbol) {
  if (!out_size || !out_symbol) return NullArg("out_size or out_symbol");
  const nee::ValueInfo* vi = InfoAt(session, is_output, index);
  if (!vi) return Err(NEE_STATUS_INVALID_ARGUMENT, "input/output index out of range");
  if (!vi->type.shape || axis >= vi->type.shape->size()) return Err(NEE_STATUS_INVALID_ARGUMENT, "axis out of range");
  const nee::Dim& d = (*vi->type.shape)[axis];
  *out_size = d.value;
  *out_symbol = d.symbol.c_str();
  return nullptr;
}

nee_status_t nee_session_end_profiling(nee_session_t* session, char* buffer, size_t capacity, size_t* out_length) {
  if (!session) return NullArg("session");
  return Guard([&]() -> nee_status_t {
    std::lock_guard<std::mutex> lock(session->profile_mu);
    if (session->sandbox) {  // (a sandboxed session never profiles)
      FillString("", buffer, capacity, out_length);
      return nullptr;
    }
    nee::Result<std::string> path = session->session->EndProfiling();
    if (!path.ok()) return MakeStatus(path.status());
    if (!path->empty()) session->profile_path = *path;
    FillString(session->profile_path, buffer, capacity, out_length);
    return nullptr;
  });
}

nee_status_t nee_session_profile_summary(const nee_session_t* session, char* buffer, size_t capacity,
                                         size_t* out_length) {
  if (!session) return NullArg("session");
  return Guard([&]() -> nee_status_t {
    FillString(session->sandbox ? std::string() : session->session->ProfileSummary(), buffer, capacity, out_length);
    return nullptr;
  });
}

nee_status_t nee_session_metadata(const nee_session_t* session, const char* key, char* buffer, size_t capacity,
                                  size_t* out_length) {
  if (!session) return NullArg("session");
  if (!key) return NullArg("key");
  return Guard([&]() -> nee_status_t {
    const nee::Model& m = ModelOf(session);
    std::string k = key, v;
    if (k == "producer_name") v = m.producer_name;
    else if (k == "producer_version") v = m.producer_version;
    else if (k == "domain") v = m.domain;
    else if (k == "doc_string") v = m.doc_string;
    else if (k == "graph_name") v = m.graph.name;
    else if (k == "graph_doc_string") v = m.graph.doc_string;
    else if (k == "model_version") v = std::to_string(m.model_version);
    else if (k == "ir_version") v = std::to_string(m.ir_version);
    else if (k == "opsets") {
      for (const auto& o : m.opset_imports)
        v += (v.empty() ? "" : ",") + (o.domain.empty() ? std::string("ai.onnx") : o.domain) + ":" + std::to_string(o.version);
    } else if (k.rfind("custom:", 0) == 0) {
      bool found = false;
      for (const auto& [mk, mv] : m.metadata_props)
        if (mk == k.substr(7)) { v = mv; found = true; }
      if (!found) return Err(NEE_STATUS_INVALID_ARGUMENT, ("no metadata_props entry '" + k.substr(7) + "'").c_str());
    } else {
      return Err(NEE_STATUS_INVALID_ARGUMENT, ("unknown metadata key '" + k + "'").c_str());
    }
    FillString(v, buffer, capacity, out_length);
    return nullptr;
  });
}

size_t nee_session_custom_metadata_count(const nee_session_t* session) {
  return session ? ModelOf(session).metadata_props.size() : 0;
}
const char* nee_session_custom_metadata_key(const nee_session_t* session, size_t index) {
  if (!session || index >= ModelOf(session).metadata_props.size()) return nullptr;
  return ModelOf(session).metadata_props[index].first.c_str();
}

nee_status_t nee_session_model_stats(const nee_session_t* session, nee_model_stats_t* out_stats) {
  if (!session) return NullArg("session");
  if (!out_stats) return NullArg("out_stats");
  *out_stats = session->stats;
  return nullptr;
}

size_t nee_session_op_type_count(const nee_session_t* session) { return session ? session->op_histogram.size() : 0; }

nee_status_t nee_session_op_type_at(const nee_session_t* session, size_t index, const char** out_op_type,
                                    size_t* out_node_count) {
  if (!session) return NullArg("session");
  if (!out_op_type || !out_node_count) return NullArg("out_op_type or out_node_count");
  if (index >= session->op_histogram.size()) return Err(NEE_STATUS_INVALID_ARGUMENT, "op index out of range");
  *out_op_type = session->op_histogram[index].first.c_str();
  *out_node_count = session->op_histogram[index].second;
  return nullptr;
}

nee_status_t nee_session_run(const nee_session_t* session, const char* const* input_names,
                             const nee_value_t* const* inputs, size_t input_count, const char* const* output_names,
                             size_t output_count, nee_value_t** out_values) {
  return nee_session_run_with_options(session, nullptr, input_names, inputs, input_count, output_names, output_count,
                                      out_values);
}

nee_status_t nee_session_run_with_options(const nee_session_t* session, const nee_run_options_t* run_options,
                                          const char* const* input_names, const nee_value_t* const* inputs,
                                          size_t input_count, const char* const* output_names, size_t output_count,
                                          nee_value_t** out_values) {
  if (!session) return NullArg("session");
  if (!out_values) return NullArg("out_values");
  if (output_count > 0 && !output_names) return NullArg("output_names");
  if (session->sandbox)
    return Guard([&] {
      return session->sandbox->Run(run_options, input_names, inputs, input_count, output_names, output_count,
                                   out_values);
    });
  return Guard([&]() -> nee_status_t {
    nee_status_t error = nullptr;
    auto feed = NamedInputs(input_names, inputs, input_count, &error);
    if (error) return error;
    std::vector<std::string> wanted;
    for (size_t i = 0; i < output_count; ++i) {
      if (!output_names[i]) return NullArg("an output name");
      wanted.emplace_back(output_names[i]);
    }
    auto results = session->session->Run(feed, wanted, run_options ? &run_options->options : nullptr);
    if (!results.ok()) return MakeStatus(results.status());
    for (size_t i = 0; i < results->size(); ++i) out_values[i] = Wrap(std::move(results.value()[i]));
    return nullptr;
  });
}

nee_status_t nee_session_plan_report(const nee_session_t* session, const char* const* input_names,
                                     const nee_value_t* const* inputs, size_t input_count,
                                     nee_plan_report_t* out_report) {
  if (!session) return NullArg("session");
  if (!out_report) return NullArg("out_report");
  if (session->sandbox)
    return Err(NEE_STATUS_NOT_IMPLEMENTED, "the memory plan report is not available for a sandboxed session");
  return Guard([&]() -> nee_status_t {
    nee_status_t error = nullptr;
    auto feed = NamedInputs(input_names, inputs, input_count, &error);
    if (error) return error;
    const nee::Graph& g = session->session->model().graph;
    std::vector<nee::TypeInfo> types;
    for (const auto& gi : g.inputs) {
      nee::TypeInfo t = gi.type;
      if (const nee::Initializer* init = g.FindInitializer(gi.name))
        t = nee::TypeInfo::Tensor(init->tensor.dtype(), nee::ShapeFromDims(init->tensor.dims()));
      for (const auto& f : feed)
        if (f.name == gi.name && f.value.is_tensor())
          t = nee::TypeInfo::Tensor(f.value.tensor().dtype(), nee::ShapeFromDims(f.value.tensor().dims()));
      types.push_back(std::move(t));
    }
    auto report = session->session->ReportPlan(types);
    if (!report.ok()) return MakeStatus(report.status());
    out_report->node_count = report->num_nodes;
    out_report->value_count = report->num_values;
    out_report->planned_value_count = report->num_planned;
    out_report->arena_bytes = report->arena_bytes;
    out_report->planned_bytes = report->planned_bytes;
    return nullptr;
  });
}

}  // extern "C"
